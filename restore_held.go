package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
)

// Passes over one store at once (restore jobs with selections of their
// own) meet each other's claims on the segments they share. With
// RunOptions.WaitClaimed a pass does not leave such a segment: it puts it
// off to its end, after every other segment it selects from, and then
// watches its claim record, with a back-off, until its holder lets it go,
// and restores it, one segment at a time, so that the crash bound stays
// one block per segment in flight. What the holder left in the segment
// (the records its selection did not take, listed in the progress) is all
// such a pass reads of it.

// Back-off between two looks at the record of a segment another restorer
// holds: full jitter from heldBase, doubling up to heldMax.
const (
	heldBase = 25 * time.Millisecond
	heldMax  = 500 * time.Millisecond
)

// restoreHeld restores the segments held, which other restorers held when
// the pass met them, waiting for each until opts.WaitClaimed from now;
// settle accounts for each outcome as Run does. stop says that the pass
// ends, returning err.
func (r *Restorer) restoreHeld(ctx context.Context, opts *RunOptions, held []string, rep *Report, settle func(string, error) (bool, error)) (stop bool, err error) {
	until := time.Now().Add(opts.WaitClaimed)
	for _, name := range held {
		r.log.Debug("waiting for a segment held by another restorer", slog.String("segment", name), slog.Duration("at_most", time.Until(until)))
		for attempt := 0; ; attempt++ {
			if opts.Limit > 0 && rep.Delivered+rep.Quarantined >= opts.Limit {
				return false, nil
			}
			began := time.Now()
			err := r.awaitRelease(ctx, opts, name, until, attempt)
			r.log.Debug("waited for a segment held by another restorer", slog.String("segment", name), slog.Duration("waited", time.Since(began)), slog.Bool("released", err == nil))
			switch {
			case ctx.Err() != nil:
				return true, ctx.Err()
			case r.closing.Err() != nil:
				return settle(name, ErrClosed)
			case opts.Stop != nil && opts.Stop.Err() != nil:
				return settle(name, &blockStop{context.Cause(opts.Stop)})
			case err == nil:
				var moved bool
				moved, err = r.restoreWithSides(ctx, name, opts, rep, nil)
				if moved && !errors.Is(err, ErrClaimed) {
					// Its holder may have moved records this pass
					// selects into segments it did not list.
					rep.Moved++
				}
			}
			if errors.Is(err, ErrClaimed) && time.Now().Before(until) {
				continue // taken by another since: wait again
			}
			if stop, err := settle(name, err); stop {
				return true, err
			}
			break
		}
	}
	return false, nil
}

// awaitRelease returns once the segment name may be claimed (its record is
// gone, released, or unchanged for its holder's lease), looking at its
// record after a back-off grown for attempt (at once for the first), or
// an error wrapping ErrClaimed once until passed, or the error of a stop
// (ctx, opts.Stop, Close).
func (r *Restorer) awaitRelease(ctx context.Context, opts *RunOptions, name string, until time.Time, attempt int) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.closing, cancel)() // Close ends the wait
	if opts.Stop != nil {
		defer context.AfterFunc(opts.Stop, cancel)()
	}
	for look := attempt; ; look++ {
		if look > 0 {
			d := backoff.FullJitter(heldBase, heldMax, look)
			if left := time.Until(until); d > left {
				d = max(left, 0)
			}
			if err := backoff.Sleep(wctx, d); err != nil {
				return err
			}
		}
		s, err := r.claimer.Look(wctx, name)
		switch {
		case wctx.Err() != nil:
			return wctx.Err()
		case err == nil && (s.Record == nil || !s.Live):
			return nil
		case !time.Now().Before(until):
			holder := "another restorer"
			if s.Record != nil {
				holder = fmt.Sprintf("%q", s.Record.Owner)
			}
			return fmt.Errorf("%w: segment %s: still held by %s after the pass waited %s for it", ErrClaimed, name, holder, opts.WaitClaimed)
		}
		// A failed look is tried again like a live claim: the run that
		// follows says what is wrong.
	}
}
