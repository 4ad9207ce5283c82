package dlqdump

import (
	"errors"
	"fmt"
	"io"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
)

// A selective pass costs what it selects. The records a filtered pass does
// not select stay in their segment: the segment's progress lists them (its
// Aside runs that are not for quarantine, "the remainder") and the segment
// stays ready, its claim released. A later pass reads only the blocks of
// those records, handles those its filters select and leaves the others
// listed, and finishes the segment once none is left. Nothing is copied:
// many passes (restore jobs) over one store rewrite none of it. Only a
// remainder too large for a claim record (Progress.Full) is copied into a
// side segment, as before.

// hasRemainder reports whether the progress lists records the filters left.
func (g *segRun) hasRemainder() bool {
	for _, a := range g.prog.Aside {
		if !a.Quarantine {
			return true
		}
	}
	return false
}

// leave ends the work on a segment that keeps records the filters left: its
// progress (every other record handled, those listed) is saved and its
// claim released, and it stays ready.
func (g *segRun) leave() error {
	g.rep.LeftSegments++
	if g.dry {
		return nil
	}
	return g.save(true)
}

// readRemainder handles the records a previous pass left (the remainder),
// reading their blocks only. The position stays at the end of the segment;
// the progress always lists the remainder not yet handled, those of the
// block being read from the next record on, and what this pass left, so that
// a restorer taking over after any interruption neither repeats more than a
// block nor loses a record.
func (g *segRun) readRemainder() error {
	if g.hasQuarantineRuns() {
		// Written first, so that the runs left are the remainder alone.
		if err := g.writeSides(false); err != nil {
			return err
		}
	}
	release, err := g.holdOneAtATime()
	if err != nil {
		return err
	}
	defer release()
	plan := g.blockPlan() // a block none of whose records it can select is not read (restore_skip.go)
	g.rescan, g.pending = true, g.prog.Aside
	g.prog.Aside, g.prog.Skipped = nil, 0
	defer func() { g.rescan, g.current, g.pending = false, nil, nil }()
	var b segment.Block
	defer b.Release()
	for len(g.pending) > 0 {
		off := g.pending[0].Offset
		n := 1
		for n < len(g.pending) && g.pending[n].Offset == off {
			n++
		}
		if !g.mayHold(plan, off) {
			for _, a := range g.pending[:n] {
				g.prog.Aside = append(g.prog.Aside, a) // left as they were
				g.prog.Skipped += a.Records()
				g.rep.Skipped += a.Records()
			}
			g.pending = g.pending[n:]
			continue
		}
		g.current, g.pending = g.pending[:n], g.pending[n:]
		g.cursor = g.current[0].From
		if err := g.remainderBlock(&b, off); err != nil {
			return err
		}
	}
	return nil
}

// remainderBlock handles the remainder of the block at off, then
// checkpoints.
func (g *segRun) remainderBlock(b *segment.Block, off int64) error {
	if err := g.ctx.Err(); err != nil && !g.lost() {
		return g.stop(segment.Position{Offset: off, Seq: g.cursor}, err)
	}
	if err := g.sr.Seek(segment.Position{Offset: off, Seq: g.cursor}); err != nil {
		return g.quarantineWhole("progress", "its progress lists records left at offset "+fmt.Sprint(off)+", which the segment does not have: "+err.Error(), 0)
	}
	err := g.sr.ReadBlock(b)
	var ce *segment.CorruptError
	switch {
	case errors.As(err, &ce):
		// Readable when the records were left, damaged since: they
		// cannot be read, and the segment is quarantined when done.
		g.damaged(err)
		g.current = nil
		return g.save(true)
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
		fallthrough
	case err != nil:
		return fmt.Errorf("dlqdump: segment %s: read the block at offset %d holding records left: %w", g.name, off, err)
	case b.Info().Offset != off:
		return g.quarantineWhole("progress", fmt.Sprintf("its progress lists records left in a block at offset %d; the block there is at %d", off, b.Info().Offset), 0)
	}
	defer g.flushCounts()
	g.blk = b
	if err := g.handle(b, g.leftHas, segment.Position{Offset: off, Seq: g.cursor}); err != nil {
		return err
	}
	g.current = nil
	if err := g.save(false); err != nil {
		return err
	}
	if g.opts.OnBlock != nil && !g.dry {
		g.flushCounts()
		if err := g.opts.OnBlock(*g.rep); err != nil {
			return g.stop(b.Next(), &blockStop{err})
		}
	}
	return nil
}

// holdOneAtATime takes the delivery token for the rest of the run, when it
// is one of a pipeline's segments in flight, for a run that reads its
// blocks one at a time (readRemainder, readPlanned), each as large as the
// Restorer allows: read as one segment at a time was, holding the token to
// the last (restore_memory.go). release gives it back; a run stopped while
// it waits stops where it is.
func (g *segRun) holdOneAtATime() (release func(), err error) {
	if g.in == nil || g.holding {
		return func() {}, nil
	}
	if err := g.r.takeDelivery(g.ctx); err != nil {
		if g.lost() {
			return nil, err
		}
		return nil, g.stop(segment.Position{Offset: g.prog.Offset, Seq: g.prog.Seq}, err)
	}
	g.holding = true
	return func() { g.holding = false; g.r.giveDelivery() }, nil
}

// leftHas reports whether record seq of the block being read is one the
// previous pass left.
func (g *segRun) leftHas(seq uint64) bool {
	for _, a := range g.current {
		if a.Has(seq) {
			return true
		}
	}
	return false
}

// hasQuarantineRuns reports whether the progress lists records set aside
// for quarantine and not yet in a side segment.
func (g *segRun) hasQuarantineRuns() bool {
	for _, a := range g.prog.Aside {
		if a.Quarantine {
			return true
		}
	}
	return false
}

// saved returns the progress to save: while the remainder is read, its runs
// not yet handled follow those this pass set aside.
func (g *segRun) saved() *claims.Progress {
	if !g.rescan {
		return &g.prog
	}
	p := g.prog
	p.Aside = append([]claims.Aside(nil), g.prog.Aside...)
	for _, a := range g.current {
		if rest, ok := a.Since(g.cursor); ok {
			p.Aside = append(p.Aside, rest)
		}
	}
	p.Aside = append(p.Aside, g.pending...)
	var left uint64
	for _, a := range p.Aside {
		if !a.Quarantine {
			left += a.Records()
		}
	}
	p.Skipped = left
	return &p
}
