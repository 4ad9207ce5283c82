package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/dlqdump/dlqdump/sink"
)

// transfer puts a copy of a segment into the same area of DST: it recognises
// an identical copy there already, or calls prepare (which writes what must
// be in DST before the copy is) and copies the bytes, publishing them only
// if nothing of that name is there. A quarantined segment gets its reason.
func (c *copier) transfer(si sink.Info, prepare func(sameThere bool) error, res copyResult) (copyResult, error) {
	if ex, ok := c.existing[si.Area][si.Name]; ok {
		if err := c.mustBeSame(si); err != nil {
			return res, err
		}
		if err := prepare(true); err != nil {
			return res, err
		}
		res.same = true
		return res, c.keepReason(si, ex.Reason)
	}
	if err := prepare(false); err != nil {
		return res, err
	}
	size, err := c.copyBytes(si, si.Area, si.Name)
	if errors.Is(err, sink.ErrExist) {
		// Published meanwhile (by another copy): it must be this one.
		if err := c.mustBeSame(si); err != nil {
			return res, err
		}
		res.same = true
		return res, c.keepReason(si, "")
	}
	if err != nil {
		return res, err
	}
	res.size = size
	return res, c.keepReason(si, "")
}

// mustBeSame checks that the segment in DST has the bytes of the one in
// SRC.
func (c *copier) mustBeSame(si sink.Info) error {
	same, err := c.sameContent(si)
	if err != nil {
		return err
	}
	if !same {
		verb := map[bool]string{false: "copied", true: "moved"}[c.move]
		return fmt.Errorf("%s already exists with other content than %s: not %s", c.dst.segPath(si.Area, si.Name), c.src.segPath(si.Area, si.Name), verb)
	}
	return nil
}

// keepReason gives a quarantined segment's copy the reason of the original,
// unless it has it (had is its reason in DST, "" for a new copy).
func (c *copier) keepReason(si sink.Info, had string) error {
	if si.Area != sink.AreaQuarantine || si.Reason == "" || had == si.Reason {
		return nil
	}
	if err := c.dst.reader.Move(c.a.ctx, si.Name, sink.AreaQuarantine, sink.AreaQuarantine, si.Reason); err != nil {
		return fmt.Errorf("keep the quarantine reason of %s: %w", c.dst.segPath(si.Area, si.Name), err)
	}
	return nil
}

// copyBytes copies a segment's bytes into DST, as segment name of area,
// through the destination's Reader.Create, publishes them unless a segment
// of that name is there (an error wrapping sink.ErrExist) and reads the copy
// back. Nothing is published in part: an interrupted copy leaves at most a
// temporary file (fs: ".NAME.part") that the next copy of the segment, or
// the next restore, removes.
func (c *copier) copyBytes(si sink.Info, area sink.Area, name string) (size int64, err error) {
	ctx := c.a.ctx
	srcPath, dstPath := c.src.segPath(si.Area, si.Name), c.dst.segPath(area, name)
	f, err := c.src.reader.Open(ctx, si.Area, si.Name)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", srcPath, err)
	}
	defer f.Close()
	size = f.Size()
	sw, err := c.dst.reader.Create(ctx, area, name)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", dstPath, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = sw.Abort()
		}
	}()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var start int64
	if c.bar != nil {
		start = c.bar.done.Load()
	}
	for n := int64(0); n < size; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		k := min(int64(len(buf)), size-n)
		got, err := f.ReadAt(buf[:k], n)
		if int64(got) < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("read %s at offset %d: %w", srcPath, n, err)
		}
		if _, err := sw.Write(buf[:k]); err != nil {
			return 0, fmt.Errorf("write %s at offset %d: %w", dstPath, n, err)
		}
		h.Write(buf[:k])
		n += k
		c.bar.set(start + n)
	}
	if err := sw.Commit(ctx); err != nil {
		if errors.Is(err, sink.ErrExist) {
			return 0, err
		}
		return 0, fmt.Errorf("publish %s: %w", dstPath, err)
	}
	committed = true
	if err := c.checkCopy(area, name, size, h.Sum(nil)); err != nil {
		if derr := c.dst.reader.Delete(context.WithoutCancel(ctx), area, name); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove the bad copy: %w", derr))
		}
		return 0, err
	}
	return size, nil
}

// checkCopy reads a published copy back and compares it with the size and
// SHA-256 of the original.
func (c *copier) checkCopy(area sink.Area, name string, size int64, sum []byte) error {
	dstPath := c.dst.segPath(area, name)
	got, gotSize, err := c.a.hashSegment(c.dst, area, name)
	if err != nil {
		return fmt.Errorf("read back %s: %w", dstPath, err)
	}
	if gotSize != size || !bytes.Equal(got, sum) {
		return fmt.Errorf("read back %s: %d bytes, SHA-256 %x; the original has %d bytes, SHA-256 %x", dstPath, gotSize, got, size, sum)
	}
	return nil
}

// hashSegment returns the SHA-256 and size of a segment.
func (a *app) hashSegment(l *location, area sink.Area, name string) ([]byte, int64, error) {
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
func (c *copier) sameContent(si sink.Info) (bool, error) {
	x, xs, err := c.a.hashSegment(c.src, si.Area, si.Name)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", c.src.segPath(si.Area, si.Name), err)
	}
	y, ys, err := c.a.hashSegment(c.dst, si.Area, si.Name)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", c.dst.segPath(si.Area, si.Name), err)
	}
	return xs == ys && bytes.Equal(x, y), nil
}
