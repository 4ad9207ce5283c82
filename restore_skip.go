package dlqdump

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// A selective pass reads only the blocks of a segment that may hold a
// record it selects: the segment's footer (each block's time range and
// sequence numbers) and summary (each block's header values and payload
// bytes) say which cannot (selection.Plan). Such a block is not read: its
// records are left in the segment, as a run of the remainder
// (restore_remainder.go), as they would be had the block been read and none
// of them selected, and counted as skipped. The blocks that may hold one are
// read one at a time and checkpointed as readBlocks does. Before, a segment
// that might hold a selected record was read whole.

// blockPlan returns which blocks of the segment's footer may hold a record
// the pass selects; nil when each may (or the pass is not selective, or
// the segment has no footer).
func (g *segRun) blockPlan() []bool {
	if !g.filtered || g.opts.sel.IsAll() {
		return nil
	}
	ft := g.sr.Footer()
	if ft == nil || len(ft.Blocks) == 0 {
		return nil
	}
	area := sink.AreaReady
	if g.opts.Area == AreaQuarantine {
		area = sink.AreaQuarantine // released from there
	}
	var sum *segment.Summary
	if p := g.r.plannedWith(area, g.name); p != nil {
		sum = p.sum
	} else {
		sum, _ = g.sr.Summary() // none, damaged or sealed: every block may
	}
	hdr := g.hdr
	p := g.opts.sel.Plan(&selection.Segment{Area: area, Name: g.name, Header: &hdr, Footer: ft, Summary: sum})
	if p.Skip {
		return make([]bool, len(ft.Blocks)) // none may
	}
	return p.Blocks
}

// mayHold reports whether the block at offset off may hold a selected
// record, by plan (blockPlan); a block the footer does not list may.
func (g *segRun) mayHold(plan []bool, off int64) bool {
	if plan == nil {
		return true
	}
	bl := g.sr.Footer().Blocks
	i := sort.Search(len(bl), func(i int) bool { return bl[i].Offset >= off })
	return i == len(bl) || bl[i].Offset != off || plan[i]
}

// readPlanned is readBlocks for a pass whose plan rules out blocks
// (plan[i] false for block i of the footer): those are left unread, the
// others read one at a time.
func (g *segRun) readPlanned(plan []bool) error {
	release, err := g.holdOneAtATime()
	if err != nil {
		return err
	}
	defer release()
	ft := g.sr.Footer()
	var b segment.Block
	defer b.Release()
	for i := range ft.Blocks {
		bi := &ft.Blocks[i]
		if bi.End() <= g.prog.Offset {
			continue // handled before
		}
		next := segment.Position{Offset: bi.End(), Seq: bi.FirstSeq + uint64(bi.Count)}
		if plan[i] {
			err = g.plannedBlock(&b, bi, next)
		} else {
			err = g.leaveBlock(bi, next)
		}
		if err != nil {
			return err
		}
	}
	g.prog.Offset, g.prog.Seq = g.blocksEnd(ft), ft.Records
	return nil
}

// leaveBlock leaves the records of a block no record of which can be
// selected, from the position on, without reading it. Its checkpoint is
// that of the next block read, or the segment's last.
func (g *segRun) leaveBlock(bi *segment.BlockInfo, next segment.Position) error {
	from := max(bi.FirstSeq, g.prog.Seq)
	if from < next.Seq {
		g.prog.LeaveRun(bi.Offset, from, next.Seq)
		g.prog.Skipped += next.Seq - from
		g.rep.Skipped += next.Seq - from
	}
	g.prog.Offset, g.prog.Seq = next.Offset, next.Seq
	last := g.lastBlock(next)
	if last {
		g.prog.Done = true
	}
	switch {
	case g.prog.Full():
		// More runs than a claim record holds: written out, as a
		// block read would.
		return g.writeSides(true)
	case last:
		return g.saveLast()
	}
	return nil
}

// plannedBlock reads the block bi (up to next), which may hold a record the
// pass selects, into b and handles it as readBlocks does.
func (g *segRun) plannedBlock(b *segment.Block, bi *segment.BlockInfo, next segment.Position) error {
	pos := segment.Position{Offset: bi.Offset, Seq: max(bi.FirstSeq, g.prog.Seq)}
	if err := g.ctx.Err(); err != nil && !g.lost() {
		return g.stop(pos, err)
	}
	if err := g.sr.Seek(pos); err != nil {
		return g.quarantineWhole("progress", "its checkpoint is outside the segment: "+err.Error(), 0)
	}
	err := g.sr.ReadBlock(b)
	var ce *segment.CorruptError
	switch {
	case errors.As(err, &ce) && errors.Is(err, segment.ErrTooLarge):
		return g.tooLarge(err)
	case errors.As(err, &ce):
		g.damaged(err) // skipped, as readBlocks does
		g.prog.Offset, g.prog.Seq = next.Offset, next.Seq
		if g.lastBlock(next) {
			g.prog.Done = true
			return g.saveLast()
		}
		return nil
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
		fallthrough
	case err != nil:
		if g.ctx.Err() != nil && !g.lost() {
			return g.stop(pos, err)
		}
		return fmt.Errorf("dlqdump: segment %s: read the block at offset %d: %w", g.name, bi.Offset, err)
	case b.Info().Offset != bi.Offset:
		return fmt.Errorf("dlqdump: segment %s: read the block at offset %d, got the one at %d", g.name, bi.Offset, b.Info().Offset)
	}
	g.prog.Offset, g.prog.Seq = pos.Offset, pos.Seq
	return g.block(b)
}
