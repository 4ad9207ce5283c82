package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
)

// One run of a job by a runner: it holds the job's claim, runs its pass
// (exec.go), writes its counts while it delivers and learns of a request as
// it does (exec_watch.go), and ends it with one decision, written in the
// same conditional write, from what the pass did and the request stored
// then (exec_end.go).

// execution is one run of a job by a runner, holding its claim.
type execution struct {
	rn   *Runner
	r    *dlqdump.Restorer
	cl   *claims.Claim
	keep *claims.Keeper
	id   string
	// marker is the due time of the marker the job was found by: its
	// marker while it runs.
	marker time.Time

	// stopped is done once the pass is to stop at its next record (a
	// request learnt, the runner closing, the window closing), with the
	// cause; stop stops it.
	stopped context.Context
	stop    context.CancelCauseFunc
	unhook  func() bool // stops the runner's closing from stopping it

	saveMu sync.Mutex // serialises the writes of the job's record
	mu     sync.Mutex // guards job, base and vel
	job    Job
	base   Job // the counts before the Run under way
	vel    velocity

	started bool   // JobStarted was told
	from    uint64 // the job's Delivered when this runner started it
	handled uint64 // its Delivered and Quarantined then
	taken   bool   // taken over from a runner that stopped
}

// Why a job's pass stopped early, at a record: RunOptions.Stop's causes.
var (
	errPaused       = errors.New("dlqdump: the job was paused")
	errCancelled    = errors.New("dlqdump: the job was cancelled")
	errWindowClosed = errors.New("dlqdump: the job's window closed")
	errClosing      = errors.New("dlqdump: the runner is closing; the job is handed over")
)

// endDeadline bounds the writes that end a job after its pass.
const endDeadline = 10 * time.Second

// newExecution returns the execution of the job of cl for rn on r. Its
// writes outlive ctx (the runner's, cancelled by Close: the pass then stops
// at its next record and the job is handed over).
func newExecution(ctx context.Context, rn *Runner, r *dlqdump.Restorer, cl *claims.Claim, id string, marker time.Time) *execution {
	x := &execution{rn: rn, r: r, cl: cl, id: id, marker: marker}
	x.stopped, x.stop = context.WithCancelCause(context.Background())
	x.keep = claims.Keep(context.WithoutCancel(ctx), cl, rn.log)
	x.unhook = context.AfterFunc(ctx, func() { x.stop(errClosing) })
	return x
}

// close releases what the execution holds.
func (x *execution) close() {
	x.keep.Stop()
	x.unhook()
	x.stop(context.Canceled)
}

// run runs the job held by x.cl; job is what its record held (nil when the
// record holds no job: it is failed with the reason).
func (x *execution) run(job *Job) {
	defer x.close()
	if job == nil || json.Unmarshal(x.cl.Progress(), &x.job) != nil || x.job.ID != x.id {
		x.job = Job{ID: x.id, Created: time.Now().UTC()}
		x.end(passEnd{kind: endBroken, err: fmt.Errorf("its record holds no job this runner can read")})
		return
	}
	x.job.Spec.ID = x.id
	// The claim was taken at the version the poll read: this is the
	// record it decided on, a request written into it since included.
	switch x.job.State {
	case Pending, Running:
	case Completed, Failed, Cancelled:
		x.release()
		x.rn.dropMarker(x.marker, x.id)
		return
	case Paused:
		x.release()
		x.rn.dropStale(x.marker, x.id)
		return
	default:
		x.end(passEnd{kind: endBroken, err: fmt.Errorf("its record holds an unknown state %.40q", x.job.State)})
		return
	}
	if x.cl.Control() != "" {
		// Asked before it started: acted on, as the request stored at
		// the end write says (a resume may have withdrawn a pause).
		x.end(passEnd{kind: endRequested, next: x.marker})
		return
	}
	x.taken = x.job.begin(x.rn.o.Owner, time.Now().UTC())
	if err := x.save(context.Background()); err != nil {
		x.rn.log.Warn("starting a job failed", slog.String("job", x.id), slog.Any("error", err))
		x.release()
		return
	}
	x.begun()
}

// runStarted runs a job the claim marked running (job, as written), taken
// over from a runner that stopped if taken.
func (x *execution) runStarted(job *Job, taken bool) {
	defer x.close()
	x.job = *job
	x.job.Spec.ID = x.id
	x.taken = taken
	x.begun()
}

// begun logs and counts the job's start and runs its pass.
func (x *execution) begun() {
	rn := x.rn
	what := "job started"
	if x.taken {
		what = "job taken over from a runner that stopped"
	}
	rn.log.Info(what, slog.String("job", x.id), slog.Duration("late", x.job.Late()), slog.Int("attempt", x.job.Attempts),
		slog.Uint64("delivered", x.job.Delivered), slog.Uint64("quarantined", x.job.Quarantined))
	x.started, x.from, x.handled = true, x.job.Delivered, x.job.Delivered+x.job.Quarantined
	if rn.met != nil {
		rn.met.JobStarted(x.job.Late(), x.taken)
	}
	x.end(x.pass())
}

// pass runs the job's pass and says how it ended.
func (x *execution) pass() passEnd {
	spec := x.job.Spec
	if _, err := spec.runOptions(); err != nil {
		return passEnd{kind: endBroken, err: err} // its Select no longer parses
	}
	x.mu.Lock()
	x.base = x.job
	x.mu.Unlock()
	if spec.Limit > 0 && x.job.Delivered+x.job.Quarantined >= spec.Limit {
		return passEnd{kind: endCompleted}
	}
	watching := x.watch()
	defer watching()
	if x.job.Left == 0 && x.job.Delivered == 0 && x.job.Attempts == 1 && len(spec.Segments) == 0 {
		x.estimate()
	}
	if ws, err := spec.windows(); err == nil && len(ws) > 0 {
		_, closes := dlqdump.NextWindow(ws, time.Now())
		t := time.AfterFunc(time.Until(closes), func() { x.stop(errWindowClosed) })
		defer t.Stop()
	}
	if c := x.cl.Control(); c != "" {
		x.stop(requested(c)) // known since the start: no record is delivered
	}
	var rep dlqdump.Report
	var err error
	if len(x.job.Releasing) > 0 {
		// A quarantine job taken over: the segments it released and did
		// not finish are ready, where its pass over the quarantine does
		// not look. They are restored first.
		opts := x.options(spec)
		opts.Area, opts.Segments, opts.OnRelease = dlqdump.AreaReady, x.job.Releasing, nil
		if spec.Limit > 0 {
			opts.Limit = spec.Limit - (x.job.Delivered + x.job.Quarantined)
		}
		rep, err = x.r.Run(x.keep.Context(), opts)
		x.counted(&rep)
		if err != nil || rep.Claimed > 0 || rep.Moved > 0 {
			return x.ended(&rep, err)
		}
		x.mu.Lock()
		x.job.Releasing = nil
		x.base = x.job
		x.mu.Unlock()
	}
	opts := x.options(spec)
	if spec.Limit > 0 {
		done := x.job.Delivered + x.job.Quarantined
		if done >= spec.Limit {
			return passEnd{kind: endCompleted}
		}
		opts.Limit = spec.Limit - done
	}
	rep, err = x.r.Run(x.keep.Context(), opts)
	x.counted(&rep)
	return x.ended(&rep, err)
}

// options returns the RunOptions of a Run of the job's pass: its selection,
// stopped by x.stopped, its counts written as it goes.
func (x *execution) options(spec Spec) dlqdump.RunOptions {
	opts, _ := spec.runOptions() // checked when the pass started
	opts.Stop = x.stopped
	opts.OnProgress = x.progress
	opts.WaitClaimed = max(x.rn.o.WaitHeld, 0)
	// A paced job over the ready area takes its records out of the
	// segments it shares (RunOptions.Carve, effective with a selection)
	// rather than holding them while it delivers: jobs over one store run
	// at once. Not over named segments: a side segment it left, stopped,
	// would not be one of them for its next pass.
	opts.Carve = opts.Rate > 0 && opts.Area == dlqdump.AreaReady && len(opts.Segments) == 0
	if opts.Area == dlqdump.AreaQuarantine {
		opts.OnRelease = x.releasing
	}
	return opts
}

// estimate estimates what is left by a dry run over the store, once: a job
// over named segments reads them only to deliver. The dry run keeps the
// small segments it read for the pass (RunOptions.KeepForPass). A stop (a
// request, the runner closing) stops it: it reads the whole store, and has
// no records of its own to stop at.
func (x *execution) estimate() {
	spec := x.job.Spec
	dry, _ := spec.runOptions() // checked when the pass started
	dry.DryRun = true
	dry.Transform = nil // it moves records between delivered and quarantined: the count is the same
	// The pass that follows reads the small segments from what the dry
	// run read: a job reads each segment it selects from once.
	dry.KeepForPass = true
	if spec.Limit > 0 {
		dry.Limit = spec.Limit
	}
	dctx, cancel := context.WithCancel(x.keep.Context())
	defer cancel()
	defer context.AfterFunc(x.stopped, cancel)()
	rep, err := x.r.Run(dctx, dry)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.job.Left = rep.Delivered + rep.Quarantined
	if spec.Limit > 0 {
		x.job.Left = min(x.job.Left, spec.Limit)
	}
	x.base.Left = x.job.Left
}

// counted sets the job's counts to what the Run reported, and makes them the
// base of the next Run.
func (x *execution) counted(rep *dlqdump.Report) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.count(rep)
	x.base = x.job
}

// ended says how a pass that returned rep and err ended.
func (x *execution) ended(rep *dlqdump.Report, err error) passEnd {
	e := x.endOf(rep, err)
	e.progressed = x.job.Delivered+x.job.Quarantined > x.handled
	return e
}

// endOf says how a pass that returned rep and err ended, but for its
// progress.
func (x *execution) endOf(rep *dlqdump.Report, err error) passEnd {
	spec := &x.job.Spec
	limitReached := spec.Limit > 0 && x.job.Delivered+x.job.Quarantined >= spec.Limit
	now := time.Now().UTC()
	switch {
	case x.keep.Lost():
		return passEnd{kind: endLost}
	case limitReached && (err == nil || isStop(err)):
		return passEnd{kind: endCompleted}
	case errors.Is(err, errPaused), errors.Is(err, errCancelled):
		return passEnd{kind: endRequested, next: now} // on at once if the request was withdrawn
	case errors.Is(err, errWindowClosed):
		return passEnd{kind: endWindow, next: spec.due(now.Truncate(time.Second).Add(time.Second))}
	case errors.Is(err, errClosing):
		return passEnd{kind: endClosing, next: now}
	case err != nil:
		return passEnd{kind: endFailed, err: err}
	case rep.Claimed > 0 || rep.Moved > 0:
		// Segments it selects are held by other restorers, or their
		// holders moved records it selects into segments its listing
		// did not have: on again once they let them go.
		return passEnd{kind: endHeld, next: now.Add(x.rn.o.PollInterval).Truncate(time.Second)}
	}
	return passEnd{kind: endCompleted}
}

// isStop reports whether err is only a stop at a record.
func isStop(err error) bool {
	return errors.Is(err, errPaused) || errors.Is(err, errCancelled) || errors.Is(err, errWindowClosed) || errors.Is(err, errClosing)
}

// requested returns the cause a pass stops with for control, a request
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

// count sets the job's counts to the base's plus what the Run did (x.mu
// held).
func (x *execution) count(rep *dlqdump.Report) {
	base := &x.base
	x.job.Delivered = base.Delivered + rep.Delivered
	x.job.Quarantined = base.Quarantined + rep.Quarantined
	x.job.Skipped = base.Skipped + rep.Skipped
	if handled := rep.Delivered + rep.Quarantined; base.Left > handled {
		x.job.Left = base.Left - handled
	} else {
		x.job.Left = 0
	}
}

// release lets the job go as it is.
func (x *execution) release() {
	x.keep.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	_ = x.cl.Release(ctx)
}
