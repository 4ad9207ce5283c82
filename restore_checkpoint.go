package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump/segment"
)

// A segment's progress: checked against the segment when its run starts,
// saved after every block (at once, or with the next renewal within
// CheckpointInterval), and saved where the run stopped when it is cut
// short, so that the next pass resumes at the record after the last one
// handled.

// stopDeadline bounds the writes that record where a cancelled run stopped.
const stopDeadline = 5 * time.Second

// lost reports whether the claim was lost (then nothing is saved).
func (g *segRun) lost() bool { return g.keep != nil && g.keep.Lost() }

// save records the progress: now when force is set or CheckpointInterval
// passed since the last write, otherwise with the next renewal.
func (g *segRun) save(force bool) error {
	if g.dry || g.carving && !force {
		return nil
	}
	if err := g.checkpointing(); err != nil {
		return err
	}
	p := g.marshal()
	if !force && time.Since(g.lastSave) < g.r.c.CheckpointInterval {
		g.keep.SetProgress(p)
		return nil
	}
	if err := g.keep.Save(g.ctx, p); err != nil {
		return fmt.Errorf("dlqdump: checkpoint segment %s: %w", g.name, err)
	}
	g.lastSave = time.Now()
	return nil
}

// stop ends the run at pos: the progress is saved (with a deadline of its
// own when the run was cancelled) and the claim released.
func (g *segRun) stop(pos segment.Position, cause error) error {
	if g.rescan {
		g.cursor = pos.Seq // the position stays at the end
	} else {
		g.prog.Offset, g.prog.Seq = pos.Offset, pos.Seq
	}
	if g.dry {
		return cause
	}
	if g.lost() {
		return fmt.Errorf("%w: segment %s", ErrLeaseLost, g.name)
	}
	if g.carving {
		// Nothing delivered since the last checkpoint: the next run
		// reads (and carves) from there again.
		return cause
	}
	if err := g.checkpointing(); err != nil {
		return errors.Join(cause, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stopDeadline)
	defer cancel()
	if err := g.keep.Save(ctx, g.marshal()); err != nil {
		return errors.Join(cause, fmt.Errorf("dlqdump: record where segment %s stopped: %w", g.name, err))
	}
	return cause
}

// checkProgress checks the saved position against the segment: it must be
// the start, the end, or a record of a block. A position the segment does
// not have (a stale or damaged record) is an error: the segment is kept.
func (g *segRun) checkProgress() error {
	p := g.prog
	if !p.Started() && len(p.Aside) == 0 {
		return nil
	}
	ft := g.sr.Footer()
	if ft == nil {
		if p.Done {
			return errors.New("its progress says it is done, but it has no footer to check that against")
		}
		return nil // unsealed: checked block by block as it is read
	}
	if !g.positionOK(ft) || p.Done && (p.Offset != g.blocksEnd(ft) || p.Seq != ft.Records) {
		return fmt.Errorf("its checkpoint (offset %d, record %d) is not a record of the segment (%d blocks, %d records): the record holding it is stale or damaged", p.Offset, p.Seq, len(ft.Blocks), ft.Records)
	}
	return g.checkAside(ft)
}

// positionOK reports whether the progress's position is the start, the end
// or a record of a block.
func (g *segRun) positionOK(ft *segment.Footer) bool {
	p := g.prog
	if p.Offset == 0 && p.Seq == 0 || p.Offset == g.sr.Start() && p.Seq == 0 {
		return true
	}
	for _, b := range ft.Blocks {
		if b.Offset == p.Offset && p.Seq >= b.FirstSeq && p.Seq < b.FirstSeq+uint64(b.Count) {
			return true
		}
	}
	return p.Offset == g.blocksEnd(ft) && p.Seq == ft.Records
}

// checkAside checks that every run set aside lies in a block before the
// position.
func (g *segRun) checkAside(ft *segment.Footer) error {
	for _, a := range append(slices.Clip(g.prog.Aside), g.prog.Carve...) {
		ok := false
		for _, b := range ft.Blocks {
			if b.Offset == a.Offset && a.From >= b.FirstSeq && a.To <= b.FirstSeq+uint64(b.Count) {
				ok = a.To <= g.prog.Seq
				break
			}
		}
		if !ok {
			return fmt.Errorf("its progress sets aside records %d..%d at offset %d, which the segment does not have before the checkpoint", a.From, a.To, a.Offset)
		}
	}
	return nil
}

// blocksEnd returns the offset after the last block.
func (g *segRun) blocksEnd(ft *segment.Footer) int64 {
	if n := len(ft.Blocks); n > 0 {
		last := ft.Blocks[n-1]
		return last.Offset + segment.BlockHeaderSize + int64(last.StoredLen)
	}
	return g.sr.Start()
}
