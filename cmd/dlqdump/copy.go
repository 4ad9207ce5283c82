package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
)

// copyLease is the claim lease mv takes on each ready segment; it is renewed
// every third of it while the segment is copied.
const copyLease = 30 * time.Second

func newCopyCmd(a *app, move bool) *cobra.Command {
	var area string
	verb, short := "cp", "Copy segments between locations (directory <-> S3, directory <-> directory)"
	long := `Copy the segments of SRC (all, or the named ones) to DST, each into the same
area (ready, quarantine with its reason, archive) under the same name. Every
segment's bytes are copied as they are, published atomically in DST and read
back: the copy must have the same size and SHA-256 as the original. A
segment already in DST with the same bytes is left as it is; one with other
bytes is an error. cp does not change SRC (a ready segment being restored
meanwhile is copied as it is).`
	if move {
		verb, short = "mv", "Move segments between locations: copy, verify, then delete the source"
		long = `Move the segments of SRC (all, or the named ones) to DST, each into the same
area (ready, quarantine with its reason, archive) under the same name.

Each ready segment is first claimed, like a restorer does, so a segment being
restored is never moved (it is reported and left in place; the exit status
is then 1) and no restorer can take it while it moves. Its bytes are copied,
published atomically in DST and read back (same size and SHA-256), and only
then is the source deleted. A segment that a restorer had partly restored
(its claim holds a checkpoint) is moved without the records already
delivered. A segment already in DST with the same bytes only has its source
deleted; one with other bytes is an error.`
	}
	cmd := &cobra.Command{
		Use:   verb + " SRC DST [SEGMENT...]",
		Short: short,
		Long:  long + "\n\nSRC and DST are each a directory or s3://BUCKET/PREFIX.",
		Example: fmt.Sprintf(`  dlqdump %[1]s /var/lib/app/dlq s3://dead-letters/orders/
  dlqdump %[1]s s3://dead-letters/orders/ ./local-copy --area quarantine
  dlqdump %[1]s /var/lib/app/dlq /mnt/other 20261122T101500.123456789Z-0123456789abcdef.dlq`, verb),
		Args: argsRange(2, -1, "SRC DST [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			areas, err := areasFlag(cmd.Flags(), area, args[2:], "all")
			if err != nil {
				return err
			}
			src, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			dst, err := a.open(args[1], false)
			if err != nil {
				return err
			}
			if overlap(src, dst) {
				return usageErrorf("%s and %s are the same location, or one is inside the other", args[0], args[1])
			}
			infos, err := a.list(src, areas, args[2:])
			if err != nil {
				return err
			}
			return a.copyAll(src, dst, infos, move)
		}),
	}
	cmd.Flags().StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	return cmd
}

// overlap reports whether two locations are the same, or one lies in an
// area of the other (such as DIR and DIR/quarantine), which cp and mv
// refuse.
func overlap(x, y *location) bool {
	subs := []string{"quarantine/", "archive/", ".claims/"}
	nested := func(inner, outer string) bool {
		for _, s := range subs {
			if strings.HasPrefix(inner, outer+s) {
				return true
			}
		}
		return false
	}
	if x.isS3() || y.isS3() {
		return x.isS3() && y.isS3() && x.bucket == y.bucket &&
			(x.prefix == y.prefix || nested(x.prefix, y.prefix) || nested(y.prefix, x.prefix))
	}
	if sameDir(x.dir, y.dir) {
		return true
	}
	ax, err1 := filepath.Abs(x.dir)
	ay, err2 := filepath.Abs(y.dir)
	if err1 != nil || err2 != nil {
		return false
	}
	ax, ay = filepath.ToSlash(ax)+"/", filepath.ToSlash(ay)+"/"
	return nested(ax, ay) || nested(ay, ax)
}

func (a *app) copyAll(src, dst *location, infos []dlqdump.SegmentInfo, move bool) error {
	// What DST already holds, by area.
	existing := map[dlqdump.Area]map[string]bool{}
	for _, ar := range allAreas {
		existing[ar] = map[string]bool{}
	}
	var total int64
	for _, si := range infos {
		total += si.Size
	}
	for _, ar := range allAreas {
		for si, err := range dst.reader.List(a.ctx, ar) {
			if err != nil {
				return fmt.Errorf("list %s segments of %s: %w", ar, dst, err)
			}
			existing[ar][si.Name] = true
		}
	}
	verb, done := "copying", "copied"
	if move {
		verb, done = "moving", "moved"
	}
	bar := a.newProgress(verb, total, true)
	var (
		count, same int
		bytesDone   int64
		failed      []error
	)
	for i, si := range infos {
		if a.interrupted() {
			break
		}
		bar.setNote(fmt.Sprintf("%d/%d segments", i+1, len(infos)))
		res, err := a.copyOne(src, dst, si, existing, move, bar)
		bytesDone += si.Size
		bar.set(bytesDone)
		if err != nil {
			if a.interrupted() {
				bar.finish()
				return err
			}
			failed = append(failed, err)
			a.warnf("%v", err)
			continue
		}
		for _, n := range res.notes {
			a.infof("%s: %s", si.Name, n)
		}
		if res.same {
			same++
		} else {
			count++
		}
		if !a.quiet {
			line := fmt.Sprintf("%s %s (%s, %s)", done, si.Name, si.Area, humanBytes(res.size))
			if res.same {
				line = fmt.Sprintf("%s %s (%s): an identical copy was already in %s", done, si.Name, si.Area, dst)
			}
			a.printOut(line)
		}
	}
	bar.finish()
	a.infof("%s %s from %s to %s%s", done, plural(count+same, "segment"), src, dst, sameNote(same))
	if len(failed) > 0 {
		return fmt.Errorf("%s of %d not %s", plural(len(failed), "segment"), len(infos), done)
	}
	return nil
}

func sameNote(same int) string {
	if same == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d already there)", same)
}

// copyResult says what copyOne did.
type copyResult struct {
	size  int64 // bytes written to DST
	same  bool  // an identical copy was already there
	notes []string
}

// copyOne copies one segment and, with move, deletes the source once the
// copy is published and read back.
func (a *app) copyOne(src, dst *location, si dlqdump.SegmentInfo, existing map[dlqdump.Area]map[string]bool, move bool, bar *progress) (res copyResult, err error) {
	ctx := a.ctx
	exists := existing[si.Area][si.Name]
	srcPath, dstPath := src.segPath(si.Area, si.Name), dst.segPath(si.Area, si.Name)
	var (
		claim dlqdump.Claim
		hb    *heartbeat
		cp    dlqdump.Checkpoint
	)
	if move && si.Area == dlqdump.AreaReady {
		claim, err = src.reader.Claim(ctx, si.Name, cliOwner(), copyLease)
		if err != nil {
			if errors.Is(err, dlqdump.ErrClaimed) {
				return res, fmt.Errorf("%s is being restored, not moved: %w", srcPath, err)
			}
			return res, fmt.Errorf("claim %s: %w", srcPath, err)
		}
		hb = startHeartbeat(ctx, claim, copyLease)
		ended := false
		defer func() {
			hb.stop()
			if !ended {
				if rerr := claim.Release(context.WithoutCancel(ctx)); rerr != nil && !errors.Is(rerr, dlqdump.ErrLeaseLost) {
					err = errors.Join(err, fmt.Errorf("release the claim on %s: %w", srcPath, rerr))
				}
			}
		}()
		cp = claim.Checkpoint()
		// Delete the source once the copy is there: Complete ends the claim.
		defer func() {
			if err != nil {
				return
			}
			hb.stop()
			if hb.lost.Load() {
				err = fmt.Errorf("lost the claim on %s while copying it (another restorer took it over): %w", srcPath, dlqdump.ErrLeaseLost)
				if !res.same {
					if derr := dst.reader.Delete(context.WithoutCancel(ctx), si.Area, si.Name); derr != nil {
						err = errors.Join(err, fmt.Errorf("remove the copy %s: %w", dstPath, derr))
					}
				}
				return
			}
			if cerr := claim.Complete(context.WithoutCancel(ctx), false); cerr != nil {
				if errors.Is(cerr, dlqdump.ErrLeaseLost) {
					ended = true
				}
				err = fmt.Errorf("copied to %s, but deleting the source %s failed: %w", dstPath, srcPath, cerr)
				return
			}
			ended = true
		}()
	}
	trim := cp.Position != (segment.Position{})
	if !move && si.Claim != nil && si.Claim.Checkpoint.Position != (segment.Position{}) {
		res.notes = append(res.notes, fmt.Sprintf("a restorer already delivered %d of its records; they are in the copy too", si.Claim.Checkpoint.Delivered))
	}
	if exists {
		if trim {
			return res, fmt.Errorf("%s already exists, and %s was partly restored: not moved", dstPath, srcPath)
		}
		same, err := a.sameContent(src, dst, si)
		if err != nil {
			return res, err
		}
		if !same {
			return res, fmt.Errorf("%s already exists with other content than %s: not %s", dstPath, srcPath, map[bool]string{false: "copied", true: "moved"}[move])
		}
		res.same = true
	} else {
		if trim {
			res.size, err = a.copyRecords(src, dst, si, cp, bar)
			if err == nil {
				res.notes = append(res.notes, fmt.Sprintf("left out the %d records a restorer already delivered", cp.Delivered))
			}
		} else if si.Area == dlqdump.AreaQuarantine && si.Reason != "" && dst.isS3() {
			res.size, err = a.copyQuarantinedToS3(src, dst, si, existing, bar)
		} else {
			res.size, err = a.copyBytes(src, dst, si, si.Area, bar)
		}
		if err != nil {
			return res, err
		}
		if si.Area == dlqdump.AreaQuarantine && si.Reason != "" && !dst.isS3() {
			if merr := dst.reader.Move(ctx, si.Name, dlqdump.AreaQuarantine, dlqdump.AreaQuarantine, si.Reason); merr != nil {
				res.notes = append(res.notes, fmt.Sprintf("the quarantine reason was not kept (%v): %q", merr, si.Reason))
			}
		}
	}
	if move && si.Area != dlqdump.AreaReady {
		if derr := src.reader.Delete(ctx, si.Area, si.Name); derr != nil {
			return res, fmt.Errorf("copied to %s, but deleting the source %s failed: %w", dstPath, srcPath, derr)
		}
	}
	return res, nil
}

// copyQuarantinedToS3 copies a quarantined segment with its reason to S3.
// An s3.Reader keeps the reason in the object's metadata, which only Move
// sets; so the segment is copied into the archive area (which restorers do
// not read), checked there and moved into quarantine with the reason.
func (a *app) copyQuarantinedToS3(src, dst *location, si dlqdump.SegmentInfo, existing map[dlqdump.Area]map[string]bool, bar *progress) (int64, error) {
	ctx := a.ctx
	if existing[dlqdump.AreaArchive][si.Name] {
		return 0, fmt.Errorf("%s is in the way: it is used to stage the copy of %s", dst.segPath(dlqdump.AreaArchive, si.Name), src.segPath(si.Area, si.Name))
	}
	size, err := a.copyBytes(src, dst, si, dlqdump.AreaArchive, bar)
	if err != nil {
		return 0, err
	}
	staged := dst.segPath(dlqdump.AreaArchive, si.Name)
	if err := dst.reader.Move(ctx, si.Name, dlqdump.AreaArchive, dlqdump.AreaQuarantine, si.Reason); err != nil {
		return 0, fmt.Errorf("move %s into quarantine: %w (the copy is left there)", staged, err)
	}
	sum, _, err := a.hashSegment(src, si.Area, si.Name)
	if err == nil {
		err = a.checkCopy(dst, si, size, sum)
	}
	if err != nil {
		return 0, err
	}
	return size, nil
}

// copyBytes copies a segment's bytes into an area of dst, publishes them
// and reads them back.
func (a *app) copyBytes(src, dst *location, si dlqdump.SegmentInfo, area dlqdump.Area, bar *progress) (int64, error) {
	ctx := a.ctx
	srcPath, dstPath := src.segPath(si.Area, si.Name), dst.segPath(area, si.Name)
	f, err := src.reader.Open(ctx, si.Area, si.Name)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", srcPath, err)
	}
	defer f.Close()
	size := f.Size()
	sw, err := dst.reader.Create(ctx, area, si.Name)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", dstPath, err)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var start int64
	if bar != nil {
		start = bar.done.Load()
	}
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			_ = sw.Abort()
			return 0, err
		}
		k := min(int64(len(buf)), size-n)
		got, err := f.ReadAt(buf[:k], n)
		if int64(got) < k {
			_ = sw.Abort()
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("read %s at offset %d: %w", srcPath, n, err)
		}
		if _, err := sw.Write(buf[:k]); err != nil {
			_ = sw.Abort()
			return 0, fmt.Errorf("write %s at offset %d: %w", dstPath, n, err)
		}
		h.Write(buf[:k])
		n += k
		bar.set(start + n)
	}
	if err := sw.Commit(ctx); err != nil {
		_ = sw.Abort()
		return 0, fmt.Errorf("publish %s: %w", dstPath, err)
	}
	at := si
	at.Area = area
	if err := a.checkCopy(dst, at, size, h.Sum(nil)); err != nil {
		if derr := dst.reader.Delete(context.WithoutCancel(ctx), area, si.Name); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove the bad copy: %w", derr))
		}
		return 0, err
	}
	return size, nil
}

// checkCopy reads a published copy back and compares it with the size and
// SHA-256 of the original.
func (a *app) checkCopy(dst *location, si dlqdump.SegmentInfo, size int64, sum []byte) error {
	dstPath := dst.segPath(si.Area, si.Name)
	got, gotSize, err := a.hashSegment(dst, si.Area, si.Name)
	if err != nil {
		return fmt.Errorf("read back %s: %w", dstPath, err)
	}
	if gotSize != size || !bytes.Equal(got, sum) {
		return fmt.Errorf("read back %s: %d bytes, SHA-256 %x; the original has %d bytes, SHA-256 %x", dstPath, gotSize, got, size, sum)
	}
	return nil
}

// hashSegment returns the SHA-256 and size of a segment.
func (a *app) hashSegment(l *location, area dlqdump.Area, name string) ([]byte, int64, error) {
	f, err := l.reader.Open(a.ctx, area, name)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	if err := hashReaderAt(h, f, f.Size()); err != nil {
		return nil, 0, err
	}
	return h.Sum(nil), f.Size(), nil
}

func hashReaderAt(h hash.Hash, r io.ReaderAt, size int64) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		k := min(int64(len(buf)), size-off)
		n, err := r.ReadAt(buf[:k], off)
		if int64(n) < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read at offset %d: %w", off, err)
		}
		h.Write(buf[:k])
		off += k
	}
	return nil
}

// sameContent reports whether a segment has the same bytes in both
// locations.
func (a *app) sameContent(src, dst *location, si dlqdump.SegmentInfo) (bool, error) {
	x, xs, err := a.hashSegment(src, si.Area, si.Name)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", src.segPath(si.Area, si.Name), err)
	}
	y, ys, err := a.hashSegment(dst, si.Area, si.Name)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", dst.segPath(si.Area, si.Name), err)
	}
	return xs == ys && bytes.Equal(x, y), nil
}

// copyRecords writes the records of a partly restored segment from its
// checkpoint on into a segment of the same name (same header) in dst, and
// reads it back.
func (a *app) copyRecords(src, dst *location, si dlqdump.SegmentInfo, cp dlqdump.Checkpoint, bar *progress) (int64, error) {
	ctx := a.ctx
	srcPath, dstPath := src.segPath(si.Area, si.Name), dst.segPath(si.Area, si.Name)
	f, err := src.reader.Open(ctx, si.Area, si.Name)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", srcPath, err)
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", srcPath, err)
	}
	if err := sr.Seek(cp.Position); err != nil {
		return 0, fmt.Errorf("%s: its checkpoint is outside the segment: %w", srcPath, err)
	}
	hdr := sr.Header()
	sw, err := dst.reader.Create(ctx, si.Area, si.Name)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", dstPath, err)
	}
	w, err := segment.NewWriter(sw, segment.Header{Codec: hdr.Codec, DataVersion: hdr.DataVersion, Created: hdr.Created, ID: hdr.ID}, nil)
	if err != nil {
		_ = sw.Abort()
		return 0, err
	}
	var b segment.Block
	var n uint64
	for {
		if err := ctx.Err(); err != nil {
			_ = sw.Abort()
			return 0, err
		}
		err := sr.ReadBlock(&b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = sw.Abort()
			return 0, fmt.Errorf("%w (run dlqdump verify; not moved)", err)
		}
		for i := range b.Len() {
			rec := b.Record(i)
			if err := w.Copy(&rec, nil); err != nil {
				_ = sw.Abort()
				return 0, fmt.Errorf("write %s: %w", dstPath, err)
			}
			n++
		}
		bar.add(segment.BlockHeaderSize + int64(b.Info().StoredLen))
	}
	if err := w.Close(); err != nil {
		_ = sw.Abort()
		return 0, fmt.Errorf("write %s: %w", dstPath, err)
	}
	if err := sw.Commit(ctx); err != nil {
		_ = sw.Abort()
		return 0, fmt.Errorf("publish %s: %w", dstPath, err)
	}
	// Read it back: every block and the footer must check out.
	g, err := dst.reader.Open(ctx, si.Area, si.Name)
	if err == nil {
		var got uint64
		var rd *segment.Reader
		if rd, err = segment.NewReader(g, g.Size(), &segment.ReaderOptions{Name: si.Name}); err == nil {
			for err == nil {
				if err = rd.ReadBlock(&b); err == nil {
					got += uint64(b.Len())
				}
			}
			if errors.Is(err, io.EOF) {
				err = nil
				if ft := rd.Footer(); ft == nil || ft.Records != n || got != n {
					err = fmt.Errorf("%d records in the copy, %d written", got, n)
				}
			}
		}
		_ = g.Close()
	}
	if err != nil {
		err = fmt.Errorf("read back %s: %w", dstPath, err)
		if derr := dst.reader.Delete(context.WithoutCancel(ctx), si.Area, si.Name); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove the bad copy: %w", derr))
		}
		return 0, err
	}
	return w.Size(), nil
}

// heartbeat renews a claim every third of its lease until stopped.
type heartbeat struct {
	done     chan struct{}
	quit     chan struct{}
	stopOnce sync.Once
	lost     atomic.Bool
}

func startHeartbeat(ctx context.Context, c dlqdump.Claim, lease time.Duration) *heartbeat {
	hb := &heartbeat{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(hb.done)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-hb.quit:
				return
			case <-ctx.Done():
				return
			}
			if err := c.Renew(ctx, c.Checkpoint()); errors.Is(err, dlqdump.ErrLeaseLost) {
				hb.lost.Store(true)
				return
			}
		}
	}()
	return hb
}

// stop ends the renewals and waits for the last one.
func (hb *heartbeat) stop() {
	hb.stopOnce.Do(func() { close(hb.quit) })
	<-hb.done
}
