package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// A running job's record is written at least every ProgressInterval (its
// counts, when they were written and how fast they grow) and before every
// checkpoint of a segment it restores, so that it never says less than the
// segments do: a pass that crashes after a checkpoint re-delivers nothing
// its job did not count, and a Limit holds across crashes. Each write
// learns of a request written into the record (claims.Claim.Control), and
// a request stops the pass at its next record.

// watch starts writing the job's record every ProgressInterval until the
// returned function is called.
func (x *execution) watch() (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(x.rn.o.ProgressInterval)
		defer t.Stop()
		requested := x.keep.Requested()
		for {
			select {
			case <-done:
				return
			case <-x.keep.Context().Done():
				return // lost: the pass stops on that context
			case <-requested:
				// A renewal found a request: written again now, so
				// that it is acted on if it still stands.
				requested = nil
			case <-t.C:
			}
			if err := x.save(context.Background()); err != nil && !errors.Is(err, claims.ErrLeaseLost) {
				x.rn.log.Debug("writing a running job's progress failed; written again next time", slog.String("job", x.id), slog.Any("error", err))
			}
		}
	}()
	return func() { close(done); <-ended }
}

// progress is the pass's RunOptions.OnProgress: it takes the counts and,
// before a segment's checkpoint, writes them.
func (x *execution) progress(rep dlqdump.Report, checkpoint bool) error {
	x.mu.Lock()
	x.count(&rep)
	x.mu.Unlock()
	if !checkpoint {
		return nil // the watcher writes them
	}
	if err := x.save(context.Background()); err != nil {
		return fmt.Errorf("dlqdump: job %s: record its counts before the segment's checkpoint: %w", x.id, err)
	}
	return nil
}

// releasing is a quarantine pass's RunOptions.OnRelease: the segment is
// noted in the job's record before it is released, with those released
// before that are still ready (not finished: a segment whose run failed),
// so that whoever takes the job over restores them.
func (x *execution) releasing(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	x.mu.Lock()
	held := slices.Clone(x.job.Releasing)
	x.mu.Unlock()
	var still []string
	for _, n := range held {
		ready, err := sink.Exists(ctx, x.rn.store.rd, sink.AreaReady, n)
		if err != nil || ready {
			still = append(still, n)
		}
	}
	if len(still) >= maxReleasing {
		return fmt.Errorf("dlqdump: job %s: %d segments it released from quarantine are still ready (%s, ...): restore them first", x.id, len(still), still[0])
	}
	x.mu.Lock()
	x.job.Releasing = append(still, name)
	x.mu.Unlock()
	return x.save(ctx)
}

// maxReleasing bounds the segments a job notes as released and not
// finished, so that its record stays small.
const maxReleasing = 64

// save writes the job into its record, with the time of its counts and its
// velocity, keeping any request, and stops the pass at its next record if
// the write found one.
func (x *execution) save(ctx context.Context) error {
	x.saveMu.Lock()
	defer x.saveMu.Unlock()
	now := time.Now().UTC()
	x.mu.Lock()
	if x.job.State == Running {
		x.job.Progressed = now
		x.job.Velocity = x.vel.add(now, x.job.Delivered+x.job.Quarantined)
	}
	p, err := json.Marshal(&x.job)
	x.mu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, endDeadline)
	defer cancel()
	if err := x.keep.Save(ctx, p); err != nil {
		return err
	}
	if c := x.cl.Control(); c != "" {
		x.stop(requested(c))
	}
	return nil
}

// velocity measures how fast a job's count grows, from the counts it wrote
// over the last velocityWindow.
type velocity struct {
	at []time.Time
	n  []uint64
}

// velocityWindow is how far back Job.Velocity looks, over about
// velocitySamples samples at most.
const (
	velocityWindow  = 10 * time.Second
	velocitySamples = 40
)

// add notes count n at now and returns the rate over the window: 0 until
// the samples span a second.
func (v *velocity) add(now time.Time, n uint64) float64 {
	if len(v.n) > 0 && n < v.n[len(v.n)-1] {
		v.at, v.n = v.at[:0], v.n[:0]
	}
	if k := len(v.at); k >= 2 && now.Sub(v.at[k-2]) < velocityWindow/velocitySamples {
		v.at, v.n = v.at[:k-1], v.n[:k-1] // a job writing often keeps a sample a fortieth of the window
	}
	v.at, v.n = append(v.at, now), append(v.n, n)
	for len(v.at) > 2 && now.Sub(v.at[1]) >= velocityWindow {
		v.at, v.n = v.at[1:], v.n[1:]
	}
	if dt := now.Sub(v.at[0]); dt >= time.Second {
		return float64(n-v.n[0]) / dt.Seconds()
	}
	return 0
}
