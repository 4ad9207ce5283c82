package dlqdump

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
)

// Carving (RunOptions.Carve): a selective pass at a slow pace over a segment
// that others select from too (restore jobs over one store) would hold the
// segment's claim for as long as it delivers, and every other pass on it
// would wait. A carving pass instead reads the segment under its claim, as
// fast as it is read, listing the records it selects in the progress's Carve
// runs rather than delivering them (those it leaves stay listed as the
// remainder, restore_remainder.go); at the end of the segment it copies the
// carved records into a ready side segment of their own, with the
// mechanism of the records set aside (restore_sides.go: the runs and the side
// segment's name written down first, its record reserved, the copy staged and
// published under the claim, then the progress saved without the runs), and
// releases the segment, which stays ready for the others. Then it restores
// the side segment, at its pace, like any other: every record of it is one
// it selects, and it is not carved again. A record carved by one pass is gone
// from the segment: passes whose selections overlap deliver it once.
//
// While it reads the segment, a carving run writes no checkpoint (it
// delivers nothing, and a run interrupted there reads it again): the first
// progress that lists carved records is the one that names their side
// segment, right before it is written, and the next drops them. So an older
// dlqdump, which knows neither, meets them only within that window.
//
// The side segment's record is pending until the segment's progress no
// longer names it (claims.Progress.Writing): a run that resumes the segment
// after an interruption between the two saves writes the same side segment
// again, finds it published, and keeps it; nobody restores it before.

// carves reports whether the run carves: the pass asks for it, selects
// records (a pass over everything would carve the whole segment), delivers
// them (not a Discard), is not a dry run, and its selection does not name
// segments (the "segment" field: it would not select the records again in
// their side segment, whose name is another).
func (g *segRun) carves() bool {
	return g.opts.Carve && g.filtered && g.opts.Discard == "" && !g.dry && !g.opts.Select.NamesSegment()
}

// selectedAll reports whether a carving run that read the segment from
// start on selected every record there: it carved them all and left none
// (nothing set aside, no block damaged, no side segment written on the way).
func (g *segRun) selectedAll(start *claims.Progress) bool {
	p := &g.prog
	return len(p.Carve) > 0 && len(p.Aside) == 0 && p.Damaged == start.Damaged && p.Sides == start.Sides && p.Skipped == start.Skipped
}

// uncarve turns a carving run that selected every record from start on
// into a run that delivers them from the segment: no other pass selects
// from it, so copying them out would cost a copy and gain nothing (a side
// segment a carving pass left, stopped, is restored so by its next pass,
// not copied again). The progress goes back to start, which lists none of
// them (none was delivered), and the records are read again (a small
// segment from the bytes a dry run kept, restore_kept.go): the carving
// read saved no checkpoint, so the record holds start already. done reports
// that the run ends there, with err.
func (g *segRun) uncarve(start claims.Progress) (done bool, err error) {
	g.r.log.Debug("a carving pass selects every record of a segment: delivering them from it", slog.String("segment", g.name), slog.Uint64("records", g.carved))
	g.rep.Carved -= g.carved
	g.carved, g.carve, g.carving = 0, false, false
	g.prog = start
	return g.readToEnd()
}

// readCarved is a dry run's reading of the records its progress lists as
// carved, not yet in their side segment: it writes no side segment, so it
// reads them where they are, as a remainder, counting those it selects as a
// restore delivers them (from their side segment, which the next run
// writes and its pass restores) and the others as left. The progress then
// lists none of them.
func (g *segRun) readCarved() error {
	aside, skipped := g.prog.Aside, g.prog.Skipped
	g.prog.Aside = nil
	for _, a := range g.prog.Carve {
		a.Quarantine, a.Reason = false, 0
		g.prog.Aside = append(g.prog.Aside, a)
	}
	g.prog.Carve = nil
	err := g.readRemainder()
	g.prog.Aside, g.prog.Skipped = aside, skipped
	return err
}

// restoreCarved restores the side segments a carving run wrote (sides), one
// after the other, without carving them again. A side segment another pass
// claimed first (one whose selection overlaps: it carves its share out of
// it, or delivers from it) is not left to it, which takes only what it
// selects: with opts.WaitClaimed the pass waits for it as for a segment held
// by another restorer (restore_held.go) and restores what is left of it;
// without, or once the wait is over, it counts it in rep.Claimed, so that
// the pass is not taken as complete (a job retries). A side segment found
// gone, or listing side segments written from it, counts in rep.Moved:
// another pass had it, and may have copied records this one selects into a
// remainder segment of its own (when its progress was full).
func (r *Restorer) restoreCarved(ctx context.Context, opts *RunOptions, sides []string, rep *Report) error {
	o := *opts
	o.Carve = false
	for _, name := range sides {
		until := time.Now().Add(opts.WaitClaimed)
		for attempt := 0; ; attempt++ {
			res, err := r.restoreRun(ctx, name, &o, rep, nil)
			if res.moved || errors.Is(err, ErrNotFound) {
				// Another pass had it (this one wrote it): that
				// pass may have moved records this one selects
				// into segments it did not list.
				rep.Moved++
			}
			if errors.Is(err, ErrClaimed) && opts.WaitClaimed > 0 && time.Now().Before(until) {
				r.log.Debug("a carved side segment is held by another pass: waiting for it", slog.String("segment", name), slog.Any("error", err))
				err = r.awaitRelease(ctx, opts, name, until, attempt)
				switch {
				case ctx.Err() != nil:
					return ctx.Err()
				case r.closing.Err() != nil:
					return ErrClosed
				case opts.Stop != nil && opts.Stop.Err() != nil:
					return &blockStop{context.Cause(opts.Stop)}
				case err == nil:
					continue
				}
			}
			switch {
			case err == nil, errors.Is(err, ErrNotFound):
			case errors.Is(err, ErrClaimed):
				r.log.Debug("a carved side segment is held by another pass", slog.String("segment", name), slog.Any("error", err))
				rep.Claimed++
			default:
				return err
			}
			break
		}
	}
	return nil
}
