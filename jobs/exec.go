package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/internal/claims"
)

// execution is one run of a job by a runner, holding its claim.
type execution struct {
	rn   *Runner
	r    *dlqdump.Restorer
	cl   *claims.Claim
	keep *claims.Keeper
	id   string
	job  Job

	started bool   // JobStarted was told
	from    uint64 // the job's Delivered when this runner started it
}

// Why a job's pass stopped early, at a block boundary.
var (
	errPaused       = errors.New("dlqdump: the job was paused")
	errCancelled    = errors.New("dlqdump: the job was cancelled")
	errWindowClosed = errors.New("dlqdump: the job's window closed")
)

// endDeadline bounds the writes that end a job after its pass.
const endDeadline = 10 * time.Second

// run runs the job held by x.cl; job is what its record held (nil when the
// record holds no job: it is failed with the reason).
func (x *execution) run(ctx context.Context, job *Job) {
	rn := x.rn
	x.keep = claims.Keep(ctx, x.cl, rn.log)
	defer x.keep.Stop()
	if job == nil || json.Unmarshal(x.cl.Progress(), &x.job) != nil || x.job.ID != x.id {
		x.job = Job{ID: x.id, Created: time.Now().UTC()}
		x.end(Failed, fmt.Errorf("its record holds no job this runner can read"))
		return
	}
	x.job.Spec.ID = x.id
	// The claim was taken at the version the poll read: this is the
	// record it decided on, a request written into it since included.
	switch x.job.State {
	case Pending, Running:
	case Completed, Failed, Cancelled:
		x.release()
		x.rn.dropMarker(x.job.At, x.id)
		return
	case Paused:
		x.release()
		x.rn.dropStale(x.job.At, x.id)
		return
	default:
		x.end(Failed, fmt.Errorf("its record holds an unknown state %.40q", x.job.State))
		return
	}
	switch x.cl.Control() {
	case requestCancel:
		x.end(Cancelled, nil)
		return
	case requestPause:
		x.end(Paused, nil)
		return
	}
	taken := x.job.begin(rn.o.Owner, time.Now().UTC())
	if err := x.save(ctx); err != nil {
		rn.log.Warn("starting a job failed", slog.String("job", x.id), slog.Any("error", err))
		x.release()
		return
	}
	x.begun(ctx, taken)
}

// runStarted runs a job the claim marked running (job, as written), taken
// over from a runner that stopped if taken.
func (x *execution) runStarted(ctx context.Context, job *Job, taken bool) {
	x.keep = claims.Keep(ctx, x.cl, x.rn.log)
	defer x.keep.Stop()
	x.job = *job
	x.job.Spec.ID = x.id
	x.begun(ctx, taken)
}

// begun logs and counts the job's start and runs its pass.
func (x *execution) begun(ctx context.Context, taken bool) {
	rn := x.rn
	what := "job started"
	if taken {
		what = "job taken over from a runner that stopped"
	}
	rn.log.Info(what, slog.String("job", x.id), slog.Duration("late", x.job.Late()), slog.Int("attempt", x.job.Attempts))
	x.started, x.from = true, x.job.Delivered
	if rn.met != nil {
		rn.met.JobStarted(x.job.Late(), taken)
	}
	x.pass(ctx)
}

// pass runs the job's pass and ends the job as it says.
func (x *execution) pass(ctx context.Context) {
	spec := &x.job.Spec
	opts, serr := spec.runOptions()
	if serr != nil {
		x.end(Failed, serr)
		return
	}
	base := x.job
	if spec.Limit > 0 {
		done := base.Delivered + base.Quarantined
		if done >= spec.Limit {
			x.end(Completed, nil)
			return
		}
		opts.Limit = spec.Limit - done
	}
	if x.job.Left == 0 && x.job.Delivered == 0 && x.job.Attempts == 1 && len(spec.Segments) == 0 {
		// What is left is estimated by a dry run over the store, once:
		// a job over named segments reads them only to deliver.
		// A pause or cancel stops it: it reads the whole store, and
		// has no block boundaries of its own.
		dry := opts
		dry.DryRun = true
		dry.Transform = nil // it moves records between delivered and quarantined: the count is the same
		dctx, stop := context.WithCancel(x.keep.Context())
		go func() {
			select {
			case <-x.keep.Requested():
				stop()
			case <-dctx.Done():
			}
		}()
		rep, err := x.r.Run(dctx, dry)
		stop()
		if err == nil {
			x.job.Left = rep.Delivered + rep.Quarantined
			if spec.Limit > 0 {
				x.job.Left = min(x.job.Left, spec.Limit)
			}
			base.Left = x.job.Left
		}
	}
	var closes time.Time
	if ws, err := spec.windows(); err == nil && len(ws) > 0 {
		_, closes = dlqdump.NextWindow(ws, time.Now())
	}
	opts.OnBlock = func(rep dlqdump.Report) error {
		x.count(&base, &rep)
		x.job.Progressed = time.Now().UTC()
		if err := x.save(ctx); err != nil {
			return err
		}
		if err := requested(x.cl.Control()); err != nil {
			return err
		}
		if !closes.IsZero() && time.Now().After(closes) {
			return errWindowClosed
		}
		return nil
	}
	var rep dlqdump.Report
	var err error
	if x.cl.Control() != "" {
		// A request came before the first block (it may have cut the
		// dry run short): it is acted on if it still stands, as a
		// block boundary does, after a write that reads it as it is
		// now. The last write may have read it a while ago, and a
		// resume may have withdrawn it since.
		if err = x.save(ctx); err == nil {
			err = requested(x.cl.Control())
		}
	}
	if err == nil {
		rep, err = x.r.Run(x.keep.Context(), opts)
	}
	x.count(&base, &rep)
	limitReached := spec.Limit > 0 && x.job.Delivered+x.job.Quarantined >= spec.Limit
	switch {
	case x.keep.Lost():
		x.rn.log.Warn("lost the claim on a job; another runner has it", slog.String("job", x.id))
	case errors.Is(err, errPaused):
		x.end(Paused, nil)
	case errors.Is(err, errCancelled):
		x.end(Cancelled, nil)
	case errors.Is(err, errWindowClosed):
		x.reschedule(spec.due(time.Now().UTC().Truncate(time.Second).Add(time.Second)), nil)
	case ctx.Err() != nil:
		// The runner is closing: pending again, due at once, for any
		// runner.
		x.reschedule(x.job.At, nil)
	case err != nil:
		if x.job.Delivered+x.job.Quarantined > base.Delivered+base.Quarantined {
			x.job.Failures = 0 // it made progress before failing
		}
		x.job.Failures++
		if x.job.Failures >= spec.MaxAttempts {
			x.end(Failed, err)
			return
		}
		wait := backoff.FullJitter(x.rn.o.RetryBase, 5*time.Minute, x.job.Failures)
		x.reschedule(time.Now().UTC().Add(wait), err)
	case rep.Claimed > 0 && !limitReached:
		// Segments it selects are held by other restorers: on again
		// once they let them go.
		x.reschedule(time.Now().UTC().Add(x.rn.o.PollInterval).Truncate(time.Second), nil)
	default:
		x.job.Left = 0
		x.end(Completed, err)
	}
}

// requested returns the error a pass stops with for control, a request
// written into the job's record, or nil.
func requested(control string) error {
	switch control {
	case requestPause:
		return errPaused
	case requestCancel:
		return errCancelled
	}
	return nil
}

// maxError bounds the error a job's record keeps.
const maxError = 1024

// errorText returns err's message, cut to maxError bytes.
func errorText(err error) string {
	msg := err.Error()
	if len(msg) > maxError {
		msg = msg[:maxError-3] + "..."
	}
	return msg
}

// count sets the job's counts to base's plus what the pass did.
func (x *execution) count(base *Job, rep *dlqdump.Report) {
	x.job.Delivered = base.Delivered + rep.Delivered
	x.job.Quarantined = base.Quarantined + rep.Quarantined
	x.job.Skipped = base.Skipped + rep.Skipped
	if handled := rep.Delivered + rep.Quarantined; base.Left > handled {
		x.job.Left = base.Left - handled
	} else {
		x.job.Left = 0
	}
}

// save writes the job into its record, keeping any request.
func (x *execution) save(ctx context.Context) error {
	p, err := json.Marshal(&x.job)
	if err != nil {
		return err
	}
	return x.keep.Save(ctx, p)
}

// end gives the job its state, clears the request it acted on, and
// releases it; once that is written, it removes the job's due marker if the
// job is no longer due. A write that failed changes no marker: the job,
// still held in its record, is taken over after its lease from its marker,
// and one this runner lost is another's.
func (x *execution) end(state State, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	now := time.Now().UTC()
	x.job.State, x.job.Request = state, ""
	if cause != nil {
		x.job.Error = errorText(cause)
	}
	if state.Final() {
		x.job.Finished = now
		x.job.Failures = 0
	}
	if x.write(ctx) {
		switch {
		case state.Final():
			x.rn.dropMarker(x.job.At, x.id)
		case state == Paused:
			x.rn.dropStale(x.job.At, x.id)
		}
	}
	x.log(state, cause)
}

// reschedule makes the job pending again, due at at: the new marker first
// (a pending job is never without one), then the record, then the old
// marker goes.
func (x *execution) reschedule(at time.Time, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	old := x.job.At
	x.job.State, x.job.At = Pending, dueTime(at)
	if cause != nil {
		x.job.Error = errorText(cause)
	}
	if err := x.rn.store.putMarker(ctx, x.job.At, x.id); err != nil {
		x.job.At = old // due as it was, its marker there
	}
	if x.write(ctx) {
		// A poll that read the record before this write may have
		// removed the new marker as stale: put it back.
		if err := x.rn.store.ensureMarker(ctx, &x.job); err != nil {
			x.rn.log.Warn("writing a job's due marker failed", slog.String("job", x.id), slog.Any("error", err))
		}
		if !x.job.At.Equal(old) {
			x.rn.dropStale(old, x.id)
		}
	}
	x.log(Pending, cause)
}

// write writes the job's last state with the request cleared, and
// releases the claim; it reports whether that was written.
func (x *execution) write(ctx context.Context) bool {
	x.keep.Stop()
	p, err := json.Marshal(&x.job)
	if err == nil {
		err = x.cl.ReleaseWith(ctx, p, "")
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, claims.ErrLeaseLost):
		x.rn.log.Warn("lost the claim on a job before recording its end; another runner has it", slog.String("job", x.id))
	default:
		x.rn.log.Warn("recording a job's end failed; another runner takes it over after its lease", slog.String("job", x.id), slog.Any("error", err))
	}
	return false
}

// release lets the job go as it is.
func (x *execution) release() {
	x.keep.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	_ = x.cl.Release(ctx)
}

// log says how the job ended, and tells the metrics.
func (x *execution) log(state State, cause error) {
	attrs := []any{slog.String("job", x.id), slog.String("state", string(state)), slog.Uint64("delivered", x.job.Delivered),
		slog.Uint64("quarantined", x.job.Quarantined)}
	switch {
	case state == Failed:
		x.rn.log.Error("job failed", append(attrs, slog.Any("error", cause))...)
	case cause != nil:
		x.rn.log.Warn("job pass failed; tried again later", append(attrs, slog.Time("at", x.job.At), slog.Any("error", cause))...)
	default:
		x.rn.log.Info("job "+string(state), attrs...)
	}
	if x.rn.met != nil && x.started {
		x.rn.met.JobEnded(string(state), x.job.Delivered-x.from)
	}
}
