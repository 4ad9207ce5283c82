package dlqdump

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
)

// A pass stopped at a record (RunOptions.Stop), and the counts it hands its
// caller as it goes (RunOptions.OnProgress): how a restore job is paused,
// cancelled or handed over within a record at any pace, and keeps a record
// that never says less than the segments' checkpoints.

// stopped returns the error the pass stops with before its next record: an
// OnProgress's error, or RunOptions.Stop's cause; nil while it goes on.
func (g *segRun) stopped() error {
	if g.halted != nil {
		return g.halted
	}
	if s := g.opts.Stop; s != nil && s.Err() != nil && !g.dry {
		return &blockStop{context.Cause(s)}
	}
	return nil
}

// cutShort returns the stop's error for err, met by a wait that RunOptions.Stop
// cut short, and err otherwise.
func (g *segRun) cutShort(err error) error {
	if err != nil && g.ctx.Err() == nil && g.waits.Err() != nil {
		if serr := g.stopped(); serr != nil {
			return serr
		}
	}
	return err
}

// pace waits until the destination may take a record: its Rate at most
// AllowRate, within Config.RateLimit and the pass's Rate. With Concurrency
// above 1 the pass's goroutine paces each record before it hands it out, in
// record order, so that a stop meets no delivery after the one it stops at.
func (g *segRun) pace(ctx context.Context) error {
	if err := g.waitRoom(ctx); err != nil {
		return err
	}
	for _, l := range []*rate.Limiter{g.r.limiter, g.opts.limiter} {
		if l != nil {
			if err := l.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// tick hands the counts to OnProgress once ProgressEvery passed since it
// last did; an error stops the pass at the next record.
func (g *segRun) tick() {
	if g.opts.OnProgress == nil || g.dry {
		return
	}
	now := time.Now()
	if now.Sub(g.ticked) < ProgressEvery {
		return
	}
	g.ticked = now
	if err := g.opts.OnProgress(*g.rep, false); err != nil && g.halted == nil {
		g.halted = &blockStop{err}
	}
}

// checkpointing hands the counts to OnProgress before a checkpoint goes to
// the store; its error keeps the checkpoint from it and stops the pass.
func (g *segRun) checkpointing() error {
	if g.opts.OnProgress == nil || g.dry {
		return nil
	}
	g.ticked = time.Now()
	if err := g.opts.OnProgress(*g.rep, true); err != nil {
		var bs *blockStop
		if errors.As(err, &bs) {
			return err
		}
		return &blockStop{err}
	}
	return nil
}
