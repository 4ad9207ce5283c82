package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/internal/claims"
)

// How a job's run ends: one decision, in one place (next), from what its
// pass did and the request stored in its record when the end is written,
// made again if a request lands in the record meanwhile
// (claims.Claim.ReleaseDecided), so that a request is acted on or said to
// be refused, never dropped: a pause or cancel wins over every end but
// completion, a resume that withdrew a pause wins over the pause, and a
// job that ended keeps no request.

// endKind is how a pass ended.
type endKind int

const (
	endCompleted endKind = iota // every record it selects handled, or its Limit reached
	endRequested                // stopped at a record by a pause or cancel (or asked before it started)
	endWindow                   // stopped at a record: its window closed
	endClosing                  // stopped at a record: its runner is closing
	endFailed                   // the pass failed
	endHeld                     // segments it selects are held by other restorers
	endBroken                   // its record holds no job this runner can run
	endLost                     // its claim was taken over: nothing is written
)

// passEnd is how a pass ended: what the decision starts from.
type passEnd struct {
	kind endKind
	err  error
	// next is when the job is due again if it goes on (pending); zero
	// for a failure: after a back-off.
	next time.Time
	// progressed says that the pass delivered or set aside records (a
	// failed one, before it failed).
	progressed bool
}

// next returns the job as the end of its pass leaves it, given control, the
// request stored in its record now: the one decision of a job's next state.
func (x *execution) next(e passEnd, control string, now time.Time) Job {
	j := x.snapshot()
	j.Request, j.Velocity = "", 0
	if e.progressed {
		j.Failures, j.FailingSince = 0, time.Time{} // the failure budget is time without progress
	}
	switch {
	case e.kind == endCompleted:
		j.State, j.Left, j.Releasing = Completed, 0, nil
		if control != "" {
			j.Refused = control + ": the job had completed when its runner learnt of it"
		}
	case e.kind == endBroken:
		j.State, j.Error = Failed, errorText(e.err)
	case control == requestCancel:
		j.State = Cancelled
	case control == requestPause:
		j.State = Paused
	case e.kind == endFailed:
		if j.FailingSince.IsZero() {
			j.FailingSince = now
		}
		j.Failures++
		j.Error = errorText(e.err)
		failAfter := j.Spec.FailAfter
		if failAfter <= 0 {
			failAfter = DefaultFailAfter
		}
		if now.Sub(j.FailingSince) >= failAfter || j.Spec.MaxAttempts > 0 && j.Failures >= j.Spec.MaxAttempts {
			j.State = Failed
			break
		}
		j.State, j.Next = Pending, dueTime(e.next)
	default:
		j.State, j.Next = Pending, dueTime(e.next)
	}
	switch {
	case j.State == Failed:
		j.Finished, j.Next = now, time.Time{} // its failures say how it failed
	case j.State.Final():
		j.Finished, j.Next, j.Failures, j.FailingSince = now, time.Time{}, 0, time.Time{}
	case j.State == Paused:
		j.Next = time.Time{}
	}
	return j
}

// retryAt returns when a failed pass is tried again: after a back-off that
// grows with the failures in a row.
func (x *execution) retryAt(now time.Time) time.Time {
	j := x.snapshot()
	return now.Add(backoff.FullJitter(x.rn.o.RetryBase, 5*time.Minute, j.Failures+1))
}

// snapshot returns a copy of the job.
func (x *execution) snapshot() Job {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.job
}

// end decides the job's next state and writes it, releasing the claim; once
// written, the job's due markers follow: a pending job's marker is written
// before its record (a pending job is never without one), those it no
// longer wants are removed after. A write that failed changes no marker:
// the job, still held in its record, is taken over after its lease from its
// marker, and one this runner lost is another's.
func (x *execution) end(e passEnd) {
	if e.kind == endLost {
		x.rn.log.Warn("lost the claim on a job; another runner has it", slog.String("job", x.id))
		return
	}
	x.keep.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	now := time.Now().UTC()
	if e.kind == endFailed {
		e.next = x.retryAt(now)
	}
	// Where it may go on, its marker first.
	next := time.Time{}
	if e.kind != endCompleted && e.kind != endBroken {
		next = dueTime(e.next)
		if next.IsZero() {
			next = x.marker
		}
		if !next.Equal(x.marker) {
			if err := x.rn.store.putMarker(ctx, next, x.id); err != nil {
				x.rn.log.Warn("writing a job's due marker failed; it goes on from its old one", slog.String("job", x.id), slog.Any("error", err))
				next, e.next = x.marker, x.marker
			}
		}
	}
	var decided Job
	var control string
	err := x.cl.ReleaseDecided(ctx, func(c string) (json.RawMessage, string) {
		control = c
		decided = x.next(e, c, now)
		p, _ := json.Marshal(&decided) // a Job always marshals
		return p, ""
	})
	switch {
	case err == nil:
	case errors.Is(err, claims.ErrLeaseLost):
		x.rn.log.Warn("lost the claim on a job before recording its end; another runner has it", slog.String("job", x.id))
		return
	default:
		x.rn.log.Warn("recording a job's end failed; another runner takes it over after its lease", slog.String("job", x.id), slog.Any("error", err))
		return
	}
	x.mu.Lock()
	x.job = decided
	x.mu.Unlock()
	switch {
	case decided.State == Pending:
		// A poll that read the record before this write may have
		// removed the new marker as stale: put it back.
		if err := x.rn.store.ensureMarker(ctx, &decided); err != nil {
			x.rn.log.Warn("writing a job's due marker failed", slog.String("job", x.id), slog.Any("error", err))
		}
		if !decided.Due().Equal(x.marker) {
			x.rn.dropStale(x.marker, x.id)
		}
	default:
		if decided.State.Final() {
			x.rn.dropMarker(x.marker, x.id)
		} else {
			x.rn.dropStale(x.marker, x.id)
		}
		if !next.IsZero() && !next.Equal(x.marker) {
			x.rn.dropStale(next, x.id)
		}
	}
	x.log(&decided, e, control)
}

// maxError bounds the error a job's record keeps.
const maxError = 1024

// errorText returns err's message, cut to maxError bytes.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if len(msg) > maxError {
		msg = msg[:maxError-3] + "..."
	}
	return msg
}

// log says how the job's run ended, with its counts, and tells the
// metrics.
func (x *execution) log(j *Job, e passEnd, control string) {
	attrs := []any{slog.String("job", x.id), slog.String("state", string(j.State)), slog.Uint64("delivered", j.Delivered),
		slog.Uint64("quarantined", j.Quarantined), slog.Uint64("skipped", j.Skipped)}
	if x.started {
		attrs = append(attrs, slog.Uint64("delivered_now", j.Delivered-x.from))
	}
	switch {
	case j.State == Failed:
		x.rn.log.Error("job failed", append(attrs, slog.Int("failures", j.Failures), slog.Time("failing_since", j.FailingSince), slog.String("error", j.Error))...)
	case j.State == Pending && e.kind == endFailed:
		x.rn.log.Warn("job pass failed; tried again later", append(attrs, slog.Time("next", j.Next), slog.Int("failures", j.Failures), slog.Any("error", e.err))...)
	case j.State == Pending && e.kind == endClosing:
		x.rn.log.Info("job handed over: the runner is closing", attrs...)
	case j.State == Pending && e.kind == endWindow:
		x.rn.log.Info("job window closed; it goes on at the next opening", append(attrs, slog.Time("next", j.Next))...)
	case j.State == Pending && e.kind == endHeld:
		x.rn.log.Info("job waits for segments other restorers hold", append(attrs, slog.Time("next", j.Next))...)
	case j.State == Pending && e.kind == endRequested:
		x.rn.log.Info("job pause withdrawn; it goes on", attrs...)
	case j.Refused != "":
		x.rn.log.Info("job "+string(j.State), append(attrs, slog.String("refused", j.Refused))...)
	default:
		x.rn.log.Info("job "+string(j.State), attrs...)
	}
	if x.rn.met != nil && x.started {
		x.rn.met.JobEnded(string(j.State), j.Delivered-x.from)
	}
}
