package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// How a segment's claim ends: finished once the segment is done (deleted,
// archived or, with damaged blocks, quarantined), forgotten when a filtered
// pass selected none of its records, or released, keeping its progress, when
// the run stops before the end.

// Finishing a segment is tried finishAttempts times, within finishDeadline.
const (
	finishAttempts  = 4
	finishRetryBase = 20 * time.Millisecond
	finishDeadline  = 30 * time.Second
)

// release stops the claim's keeper and, unless the run ended the claim,
// releases it, keeping the last saved progress.
func (g *segRun) release() {
	g.keep.Stop()
	if g.ended || g.keep.Lost() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stopDeadline)
	defer cancel()
	// The progress of the last block handled, which a CheckpointInterval
	// may have kept from the record so far: a pass ended by an error
	// resumes there, not at an older checkpoint.
	if err := g.keep.Flush(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		g.r.log.Warn("recording where a segment stopped failed; it resumes at its last checkpoint", slog.String("segment", g.name), slog.Any("error", err))
	}
	if err := g.keep.Claim().Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		g.r.log.Warn("releasing a claim failed; it is taken over after its lease", slog.String("segment", g.name), slog.Any("error", err))
	}
}

// finish completes the segment: it is deleted or archived, or, when blocks
// were damaged, moved to quarantine with what was done to it. A released
// segment whose damage that quarantine reported already, and that has
// nothing left, is finished like any other: releasing it says so.
func (g *segRun) finish() error {
	r := g.r
	if to := g.destination(); to.Area == sink.AreaQuarantine {
		return g.quarantineWhole("damaged", to.Reason, 0)
	}
	if g.untouched() {
		// A filtered pass that selected none of its records leaves it
		// as it was, rather than copying it whole into a remainder.
		g.prog.Aside = nil
		if g.dry {
			return nil
		}
		if err := g.keep.Claim().Forget(context.WithoutCancel(g.ctx)); err != nil {
			return err
		}
		g.ended = true
		return nil
	}
	// A released segment's damaged blocks go with it: the dry run says so.
	g.rep.ReleasedDamagedBlocks += g.prog.Damaged
	if g.dry {
		g.rep.Segments++
		return nil
	}
	if g.prog.Damaged > 0 {
		r.log.Warn("finishing a released segment: its damaged blocks, reported when it was quarantined, cannot be read; its intact records were all delivered or set aside",
			slog.String("segment", g.name), slog.Int("damaged_blocks", g.prog.Damaged), slog.String("damage", g.prog.Damage),
			slog.Uint64("delivered", g.prog.Delivered), slog.Bool("archived", r.c.Archive))
	}
	if err := g.end(g.destination()); err != nil {
		return err
	}
	g.rep.Segments++
	return nil
}

// destination is where finish takes a segment with nothing left to do: to
// quarantine when blocks were damaged that no quarantine reported yet,
// otherwise deleted or archived.
func (g *segRun) destination() claims.Destination {
	if g.prog.Damaged > g.reported {
		reason := fmt.Sprintf("%d damaged blocks (first: %s); its %d intact records were delivered (%d) or set aside (%d), as its claim record says",
			g.prog.Damaged, g.prog.Damage, g.prog.Delivered+g.prog.Quarantined+g.prog.Skipped, g.prog.Delivered, g.prog.Quarantined+g.prog.Skipped)
		return claims.Destination{Area: sink.AreaQuarantine, Reason: reason}
	}
	if g.r.c.Archive {
		return claims.Destination{Area: sink.AreaArchive}
	}
	return claims.Destination{Delete: true}
}

// untouched reports whether the run did nothing to the segment but skip all
// of its records.
func (g *segRun) untouched() bool {
	p := &g.prog
	return p.Delivered == 0 && p.Quarantined == 0 && p.Sides == 0 && p.Damaged == 0 && p.Skipped > 0 && len(p.Carve) == 0
}

// end finishes the claim, and counts in the metrics the records the
// segment set aside for quarantine: counted from its progress once it is
// finished, so that work repeated after an interruption is not counted
// twice, and what to accounts for (Restorer.account).
func (g *segRun) end(to claims.Destination) error {
	// Finish may be repeated: a failure (or a success whose answer was
	// lost) is tried again a few times before the claim is left to expire.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), finishDeadline)
	defer cancel()
	var err error
	for attempt := 1; ; attempt++ {
		err = g.keep.Claim().Finish(ctx, to)
		if err == nil || errors.Is(err, ErrLeaseLost) || attempt >= finishAttempts {
			break
		}
		g.r.log.Warn("finishing a segment failed; retrying", slog.String("segment", g.name), slog.Int("attempt", attempt), slog.Any("error", err))
		if backoff.Sleep(ctx, backoff.FullJitter(finishRetryBase, time.Second, attempt)) != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	g.ended = true
	g.r.account(to, &g.prog)
	return nil
}
