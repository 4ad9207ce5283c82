package dlqdump

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// writeSides copies records set aside (the progress's Aside runs) and
// carved (its Carve runs, restore_carve.go) into side segments and saves the
// progress without them: those set aside for quarantine into a quarantine
// segment, those carved into a ready one and, with all (the progress is
// full), those the filters left into a ready "remainder" (otherwise they
// stay in the segment, see hasRemainder). A side segment's name is derived
// from the segment and the runs it holds, and its bytes from the segment
// alone, so a run interrupted after publishing it finds it there on the next
// try and does not write it twice; until the progress drops the runs it
// names the side segments (Progress.Writing), which are not claimed
// meanwhile.
func (g *segRun) writeSides(all bool) error {
	var quar, rest []claims.Aside
	for _, a := range g.prog.Aside {
		if a.Quarantine {
			quar = append(quar, a)
		} else {
			rest = append(rest, a)
		}
	}
	type side struct {
		area   sink.Area
		runs   []claims.Aside
		carved bool
		name   string
	}
	var sides []side
	if len(quar) > 0 {
		sides = append(sides, side{area: sink.AreaQuarantine, runs: quar})
	}
	if len(g.prog.Carve) > 0 {
		sides = append(sides, side{area: sink.AreaReady, runs: g.prog.Carve, carved: true})
	}
	if all && len(rest) > 0 {
		sides = append(sides, side{area: sink.AreaReady, runs: rest})
	}
	if len(sides) == 0 {
		return nil
	}
	g.prog.Writing = nil
	for i := range sides {
		sides[i].name = g.sideName(sides[i].area, sides[i].runs, sides[i].carved)
		g.prog.Writing = append(g.prog.Writing, sides[i].name)
	}
	// The runs are written down, and the side segments named, before
	// the side segments are written: a run resumed after an
	// interruption names and fills the same side segments, and finds
	// them; none of them is claimed while the progress names it.
	if err := g.save(true); err != nil {
		return err
	}
	for _, sd := range sides {
		if err := g.writeSide(sd.area, sd.runs, sd.name, sd.carved); err != nil {
			return err
		}
		g.prog.Sides++
		if sd.area == sink.AreaReady && !sd.carved {
			g.prog.Remainders++
		}
		g.rep.SideSegments++
		if sd.carved && !g.dry {
			// Restored by the pass once the segment is let go (a dry
			// run writes none).
			g.carvedSides = append(g.carvedSides, sd.name)
		}
	}
	g.prog.ClearAside()
	g.prog.Writing = nil
	if !all {
		g.prog.Aside = rest // left in the segment
	}
	// From this save on, the side segments hold records the progress no
	// longer lists: they may be claimed.
	return g.save(true)
}

// writeSide writes one side segment, name, holding the records of runs;
// a carved one's bytes are kept for its pass (keepCarved).
func (g *segRun) writeSide(area sink.Area, runs []claims.Aside, name string, carved bool) error {
	var records uint64
	for _, a := range runs {
		records += a.Records()
	}
	if g.dry {
		return nil
	}
	src, err := segment.NewReader(g.f, g.f.Size(), g.r.readerOptions(g.name))
	if err != nil {
		return fmt.Errorf("dlqdump: segment %s: reopen to copy the records set aside: %w", g.name, err)
	}
	ctx := g.ctx
	// Its record first: a side segment cannot be restored while this
	// segment's progress names it (Progress.Writing), so publishing it
	// again after an interruption never delivers it twice.
	if err := g.r.claimer.ReserveNamed(ctx, name, g.name); err != nil {
		return err
	}
	// Then it is staged under a name of this claim's, and published only
	// if the claim still holds (claims.Claim.Publish): a pass that stalls
	// past its lease here never publishes it after a takeover.
	staged := g.keep.Claim().StagedName(name)
	sw, err := g.r.c.Reader.Create(ctx, sink.AreaStaging, staged)
	if err != nil {
		return fmt.Errorf("%w: stage %s segment %s: %w", ErrSink, area, name, err)
	}
	hdr := segment.Header{Codec: segment.CodecZstd, DataVersion: g.hdr.DataVersion, Created: g.hdr.Created, ID: sideID(g.hdr, name)}
	// A side segment of an encrypted segment is encrypted under the same
	// data key (its wrapped key copied, so the Restorer needs no
	// recipients), sealed under a block key of its own (a new salt). It
	// carries a summary unless Config.NoSummary (readers that predate
	// summaries refuse segments with one), as a Queue's segments do: a
	// selective pass that takes none of its records (a restore job beside
	// the one that carved it) neither claims nor reads it; without one,
	// such a pass reads it.
	var out io.Writer = sw
	var kept *keptCopy
	if carved && src.DataKey() == nil {
		kept = &keptCopy{w: sw}
		out = kept
	}
	w, err := segment.NewWriter(out, hdr, &segment.WriterOptions{BlockSize: g.blockSize(), Key: src.DataKey(), Summarize: !g.r.c.NoSummary})
	if err == nil {
		err = g.copyRuns(src, w, runs)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = sw.Commit(ctx)
		if errors.Is(err, sink.ErrExist) {
			// Staged by an earlier attempt of this claim: that copy
			// holds the same records.
			err = sw.Abort()
		}
	}
	if err != nil {
		_ = sw.Abort()
		return fmt.Errorf("%w: write %s segment %s for the records set aside from %s: %w", ErrSink, area, name, g.name, err)
	}
	if err := g.keep.Publish(ctx, claims.Publication{Staged: staged, Name: name, Area: area}, nil); err != nil {
		return fmt.Errorf("dlqdump: publish %s segment %s for the records set aside from %s: %w", area, name, g.name, err)
	}
	if kept != nil && !kept.over {
		g.r.kept.put(keptKey{area: sink.AreaReady, name: name, size: int64(len(kept.b))}, kept.b)
	}
	g.r.log.Info("wrote the records set aside", slog.String("segment", g.name), slog.String("side", name), slog.String("area", area.String()), slog.Uint64("records", records))
	return nil
}

// keptCopy writes a carved side segment to w and keeps its bytes, up to
// keptMax (over: more were written), for the pass that restores it: it
// reads them from memory instead of the store (restore_kept.go), as it
// reads what a dry run kept. Only an unencrypted side segment's are kept:
// its bytes follow from its segment and runs alone, so a copy an earlier
// attempt published under its name (found there, and kept) has them too
// (an encrypted one is sealed under a new salt each time); the size is
// checked when it is opened, as a dry run's are.
type keptCopy struct {
	w    io.Writer
	b    []byte
	over bool
}

func (k *keptCopy) Write(p []byte) (int, error) {
	if !k.over {
		if len(k.b)+len(p) > keptMax {
			k.over, k.b = true, nil
		} else {
			k.b = append(k.b, p...)
		}
	}
	return k.w.Write(p)
}

// blockSize returns the block size of side segments: the source's largest
// block (at least 512 bytes, the least BlockSize a Queue takes; the default
// for a source without a footer), so that a side segment's blocks, and with
// them the records an interruption may deliver twice, are no larger than
// its source's.
func (g *segRun) blockSize() int {
	n := 0
	if ft := g.sr.Footer(); ft != nil {
		for _, b := range ft.Blocks {
			n = max(n, int(b.RawLen))
		}
	}
	if n == 0 || n > segment.DefaultBlockSize {
		return segment.DefaultBlockSize
	}
	return max(n, 512) // the least BlockSize a Queue takes
}

// copyRuns copies the records of runs from src into w, with the reason and
// origin of quarantined ones in their headers.
func (g *segRun) copyRuns(src *segment.Reader, w *segment.Writer, runs []claims.Aside) error {
	for _, a := range runs {
		if err := src.Seek(segment.Position{Offset: a.Offset, Seq: a.From}); err != nil {
			return err
		}
		for seq := a.From; seq < a.To; seq++ {
			rec, err := src.Next()
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return fmt.Errorf("read record %d: %w", seq, err)
			}
			if rec.Seq != seq {
				return fmt.Errorf("read record %d: found record %d there", seq, rec.Seq)
			}
			if !a.Has(seq) {
				continue
			}
			var extra map[string]string
			if a.Quarantine {
				extra = map[string]string{
					HeaderQuarantine: g.prog.Reason(a),
					HeaderOrigin:     g.name + "#" + strconv.FormatUint(seq, 10),
				}
			}
			// At another sequence number: the record keeps its ID in
			// a header.
			if err := w.CopyKeepID(&g.hdr, &rec, extra); err != nil {
				return err
			}
		}
	}
	return nil
}

// sideName returns the name of the side segment holding runs in area: the
// segment's creation time, so it keeps its place in time, and an ID derived
// from the segment's name and the runs.
func (g *segRun) sideName(area sink.Area, runs []claims.Aside, carved bool) string {
	kind := area.String()
	if carved {
		kind = "carved"
	}
	return segment.FileName(g.hdr.Created, sideID(g.hdr, g.name+"|"+kind+"|"+runsKey(runs, &g.prog)))
}

func runsKey(runs []claims.Aside, p *claims.Progress) string {
	var b strings.Builder
	for _, a := range runs {
		fmt.Fprintf(&b, "%d:%d-%d:%x", a.Offset, a.From, a.To, a.Mask)
		if a.Quarantine {
			b.WriteString(":" + p.Reason(a))
		}
		b.WriteByte(';')
	}
	return b.String()
}

// sideID returns an ID for a segment created at h.Created: the time as
// NewID has it, then bytes of a hash of key instead of random ones.
func sideID(h segment.Header, key string) segment.ID {
	id := segment.NewID(h.Created)
	sum := sha256.Sum256([]byte(key))
	copy(id[6:], sum[:10])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(h.Created.UnixMilli()))
	copy(id[:6], ms[2:])
	return id
}
