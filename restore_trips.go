package dlqdump

import (
	"context"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
)

// The round trips a segment's restore saves on a distant store (S3): its
// claim is one request when the listing found no record, and the checkpoint
// of its last block says that it is done and, when nothing but finishing it
// remains, fences the claim for Finish, all in one write.

// claim takes the claim on a ready segment: with a new record, in one
// request, when the last listing found none, else reading its record first.
func (r *Restorer) claim(ctx context.Context, name string) (*claims.Claim, error) {
	if st := r.status.Load(); st != nil && !st.recorded[name] {
		return r.claimer.ClaimNew(ctx, name)
	}
	return r.claimer.Claim(ctx, name)
}

// lastBlock reports whether next, the position after a block, is the end of
// a sealed segment's blocks: that block's checkpoint says the segment is
// done.
func (g *segRun) lastBlock(next segment.Position) bool {
	ft := g.sr.Footer()
	return ft != nil && next.Offset == g.blocksEnd(ft) && next.Seq == ft.Records
}

// saveLast writes the checkpoint of a segment's last block, which says it is
// done, now. When nothing remains but finishing it (no side segment to
// write, no record carved to copy out), the same write fences the claim for
// Finish (Keeper.SaveFinal).
func (g *segRun) saveLast() error {
	if g.dry || g.carving {
		return nil
	}
	if err := g.checkpointing(); err != nil {
		return err
	}
	p := g.marshal()
	var err error
	if len(g.prog.Aside) == 0 && len(g.prog.Carve) == 0 && !g.untouched() {
		err = g.keep.SaveFinal(g.ctx, p, g.destination())
	} else {
		err = g.keep.Save(g.ctx, p)
	}
	if err != nil {
		return fmt.Errorf("dlqdump: checkpoint segment %s: %w", g.name, err)
	}
	g.lastSave = time.Now()
	return nil
}
