package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

func newVerifyCmd(a *app) *cobra.Command {
	var (
		area    string
		salvage string
	)
	cmd := &cobra.Command{
		Use:   "verify LOCATION [SEGMENT...]",
		Short: "Check every checksum and footer; --salvage the intact records",
		Long: `Read every segment (or the named ones) completely: the header, every block's
checksum and records, and the footer that indexes them. Prints one line per
segment, "ok" or "DAMAGED", and below a damaged one a line per damaged part
naming the segment and the offset where the damage starts:

  ok      20260301T120000.000000000Z-00000000000000a1.dlq (ready): 40 records in 4 blocks
  DAMAGED 20260301T130000.000000000Z-00000000000000a2.dlq (ready): 30 of 40 records readable, 1 of 4 blocks damaged
    segment 20260301T130000.000000000Z-00000000000000a2.dlq offset 1130 block 1: dlqdump: segment corrupt: block checksum 5e1f0c2a, want 9b1d7e44

The exit status is 0 only when everything is intact, 3 when damage was
found. --quiet prints only the damaged segments.

--salvage DIR writes the intact records of each damaged segment (whose header
is readable) into a new sealed segment of the same name in the location DIR
(a directory or s3://BUCKET/PREFIX), ready to be inspected, verified and
restored from there. The damaged segment itself is left as it is. DIR must
lie outside the location verified and not contain it (not its quarantine or
archive area, not an overlapping S3 prefix): the salvaged segments are
ready to restore, and records restored already would be delivered again.`,
		Example: `  dlqdump verify /var/lib/app/dlq
  dlqdump verify /var/lib/app/dlq --salvage /var/tmp/salvaged && dlqdump ls /var/tmp/salvaged`,
		Args: argsRange(1, -1, "LOCATION [SEGMENT...]"),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			areas, err := areasFlag(cmd.Flags(), area, args[1:], "all")
			if err != nil {
				return err
			}
			l, err := a.open(args[0], true)
			if err != nil {
				return err
			}
			var dst *location
			if salvage != "" {
				if dst, err = a.open(salvage, false); err != nil {
					return err
				}
				// Salvaged segments are published as ready: inside the
				// location verified (its own ready, quarantine or archive
				// area) they would be restored again, delivering records
				// that were delivered already.
				why, overlap, err := l.overlaps(dst)
				if err != nil {
					return err
				}
				if overlap {
					return usageErrorf("--salvage %s %s the location verified (%s): salvaged segments are published there as ready and would be restored again, delivering records twice; choose a location outside it",
						salvage, why, l)
				}
			}
			infos, err := a.list(l, areas, args[1:])
			if err != nil {
				return err
			}
			return a.verify(l, infos, dst)
		}),
	}
	cmd.Flags().StringVar(&area, "area", "all", "ready, quarantine, archive or all")
	cmd.Flags().StringVar(&salvage, "salvage", "", "write the intact records of damaged segments into new segments in this location")
	return cmd
}

// sameDir reports whether two paths name the same directory.
func sameDir(x, y string) bool {
	sx, err1 := os.Stat(x)
	sy, err2 := os.Stat(y)
	if err1 != nil || err2 != nil {
		return x == y
	}
	return os.SameFile(sx, sy)
}

func (a *app) verify(l *location, infos []sink.Info, salvage *location) error {
	var total int64
	for _, si := range infos {
		total += si.Size
	}
	bar := a.newProgress("verifying", total, true)
	var (
		done                           int64
		records                        uint64
		damagedSegs, damagedParts      int
		failed                         []error
		salvaged, salvagedRecs, unsalv int
		checksumsOnly                  int
	)
	for i, si := range infos {
		if a.interrupted() {
			break
		}
		bar.setNote(fmt.Sprintf("%d/%d segments", i+1, len(infos)))
		var damage []error
		var n uint64
		var sealedOnly bool
		wo := walkOpts{Sealed: func(bi segment.BlockInfo) error {
			sealedOnly = true
			n += uint64(bi.Count)
			bar.add(segment.BlockHeaderSize + int64(bi.StoredLen))
			return nil
		}}
		st, err := a.walk(l, si, wo, func(_ *segment.Header, b *segment.Block) error {
			n += uint64(b.Len())
			bi := b.Info()
			bar.add(segment.BlockHeaderSize + int64(bi.StoredLen))
			return nil
		}, func(err error) { damage = append(damage, err) })
		note := ""
		if sealedOnly {
			note = " (encrypted, no key: checksums only)"
			checksumsOnly++
		}
		done += si.Size
		bar.set(done)
		records += n
		if err != nil {
			if a.interrupted() {
				bar.finish()
				return err
			}
			failed = append(failed, err)
			a.warnf("%s: %v", si.Name, err)
			continue
		}
		if len(damage) == 0 {
			if !a.quiet {
				a.printOut(fmt.Sprintf("ok      %s (%s): %s in %s%s", si.Name, si.Area, plural(n, "record"), plural(st.Blocks, "block"), note))
			}
			continue
		}
		damagedSegs++
		damagedParts += len(damage)
		a.printOut(fmt.Sprintf("DAMAGED %s (%s): %s%s", si.Name, si.Area, damageSummary(n, st, damage), note))
		for _, d := range damage {
			a.printOut("  " + d.Error())
		}
		if salvage == nil {
			continue
		}
		if n == 0 {
			unsalv++
			a.printOut(fmt.Sprintf("  nothing to salvage from %s: no intact records", si.Name))
			continue
		}
		cnt, err := a.salvage(l, si, salvage)
		if err != nil {
			if a.interrupted() {
				bar.finish()
				return err
			}
			unsalv++
			failed = append(failed, err)
			a.warnf("salvage %s: %v", si.Name, err)
			continue
		}
		salvaged++
		salvagedRecs += int(cnt)
		a.printOut(fmt.Sprintf("  salvaged %s to %s", plural(cnt, "intact record"), salvage.segPath(sink.AreaReady, si.Name)))
	}
	bar.finish()
	if !a.quiet {
		msg := fmt.Sprintf("verified %s, %s: ", plural(len(infos), "segment"), plural(records, "intact record"))
		if damagedSegs == 0 {
			msg += "no damage"
		} else {
			msg += fmt.Sprintf("%s damaged (%s)", plural(damagedSegs, "segment"), plural(damagedParts, "damaged part"))
		}
		if salvage != nil && damagedSegs > 0 {
			msg += fmt.Sprintf("; salvaged %s from %s into %s", plural(salvagedRecs, "record"), plural(salvaged, "segment"), salvage)
		}
		if checksumsOnly > 0 {
			msg += fmt.Sprintf("; %s encrypted and checked without a key: checksums only, not that the sealed bytes authenticate nor that the records parse", plural(checksumsOnly, "segment"))
		}
		a.printOut(msg)
	}
	switch {
	case len(failed) > 0:
		return fmt.Errorf("%s could not be verified or salvaged", plural(len(failed), "segment"))
	case damagedSegs > 0:
		return silentExit(exitDamage)
	}
	return nil
}

// printOut prints a line on stdout; the bar is on stderr, so only the lock
// is needed to keep lines whole.
func (a *app) printOut(line string) {
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if a.bar != nil {
		a.bar.clearLocked() // stdout and stderr may be the same terminal
	}
	fmt.Fprintln(a.stdout, line)
}

// damageSummary says how much of a damaged segment is readable.
func damageSummary(n uint64, st walkStats, damage []error) string {
	var parts []string
	switch {
	case st.Blocks == 0 && st.Damaged == 1 && isHeaderDamage(damage):
		return "header unreadable"
	case st.UnknownLost:
		parts = append(parts, fmt.Sprintf("%s readable", plural(n, "record")))
	default:
		parts = append(parts, fmt.Sprintf("%d of %d records readable", n, n+st.Lost))
	}
	if st.Damaged > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d blocks damaged", st.Damaged, st.Blocks+st.Damaged))
	}
	for _, d := range damage {
		if errors.Is(d, segment.ErrUnsealed) {
			parts = append(parts, "no footer")
			break
		}
		var ce *segment.CorruptError
		if errors.As(d, &ce) && ce.Block < 0 && ce.Offset > 0 && strings.Contains(d.Error(), "footer") {
			parts = append(parts, "footer damaged")
			break
		}
	}
	return strings.Join(parts, ", ")
}

func isHeaderDamage(damage []error) bool {
	var ce *segment.CorruptError
	return len(damage) == 1 && errors.As(damage[0], &ce) && ce.Offset == 0 && ce.Block < 0
}

// salvage copies the intact records of a damaged segment into a new sealed
// segment of the same name in the ready area of dst.
func (a *app) salvage(l *location, si sink.Info, dst *location) (uint64, error) {
	ctx := a.ctx
	if _, err := dst.reader.Open(ctx, sink.AreaReady, si.Name); err == nil {
		return 0, fmt.Errorf("%s already exists", dst.segPath(sink.AreaReady, si.Name))
	} else if !isNotFound(err) {
		return 0, err
	}
	var (
		sw  sink.SegmentWriter
		w   *segment.Writer
		n   uint64
		key *segment.DataKey // an encrypted segment's: the copy is encrypted too
	)
	abort := func() {
		if sw != nil {
			_ = sw.Abort()
		}
	}
	wo := walkOpts{Opened: func(sr *segment.Reader) { key = sr.DataKey() }}
	_, err := a.walk(l, si, wo, func(hdr *segment.Header, b *segment.Block) error {
		if w == nil {
			var err error
			if sw, err = dst.reader.Create(ctx, sink.AreaReady, si.Name); err != nil {
				return fmt.Errorf("create %s: %w", dst.segPath(sink.AreaReady, si.Name), err)
			}
			h := segment.Header{Codec: hdr.Codec, DataVersion: hdr.DataVersion, Created: hdr.Created, ID: hdr.ID}
			if w, err = segment.NewWriter(sw, h, &segment.WriterOptions{Key: key}); err != nil {
				return err
			}
		}
		for i := range b.Len() {
			rec := b.Record(i)
			// Records after a damaged block move to other sequence
			// numbers: each keeps its ID in a header.
			if err := w.CopyKeepID(hdr, &rec, nil); err != nil {
				return fmt.Errorf("write %s: %w", dst.segPath(sink.AreaReady, si.Name), err)
			}
			n++
		}
		return nil
	}, func(error) {})
	if err != nil {
		abort()
		return 0, err
	}
	if w == nil {
		return 0, nil
	}
	if err := w.Close(); err != nil {
		abort()
		return 0, err
	}
	if err := sw.Commit(context.WithoutCancel(ctx)); err != nil {
		abort()
		return 0, fmt.Errorf("publish %s: %w", dst.segPath(sink.AreaReady, si.Name), err)
	}
	return n, nil
}
