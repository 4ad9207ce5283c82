package dumpfaults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// Harness runs the scenarios. Its fields are set once, before use; one
// Harness may run several scenarios at once.
type Harness struct {
	// S3 is the server of the S3 scenarios (s3test.NewFake starts one in
	// process). Required for them.
	S3 *s3test.Server
	// TempDir returns a new empty directory for one run. Required.
	TempDir func() (string, error)
	// Child returns a command that runs this program so that it calls
	// ChildMain (a test binary run with an environment variable its
	// TestMain dispatches on, say); the harness adds EnvChild to its
	// environment (to os.Environ() when Env is nil). Required for the
	// Crash, CrashAfter and Stall points.
	Child func() *exec.Cmd
	// Logger receives the library's logs of in-process runs. Default:
	// discard.
	Logger *slog.Logger
}

// Result is the outcome of one run.
type Result struct {
	// Scenario is the scenario's name.
	Scenario string
	// Point is the fault point; nil for the run without fault.
	Point *faults.Point
	// First, for a run that faults the recovery from an earlier fault, is
	// that earlier fault (Point then hits a call that First caused: a
	// retry, a HeadObject after a lost PUT); nil otherwise.
	First *faults.Point
	// Reached says whether the fault hit a call (true without a fault).
	// A point not reached was not explored: the run made fewer calls of
	// its operation than the run without fault.
	Reached bool
	// Violations are the invariants the run broke.
	Violations []Violation
	// Counts are the calls the run made, for runs in process, and
	// AtFault the calls made when the (first) fault hit, the faulted
	// call included; nil when none hit.
	Counts, AtFault faults.Counts
	// Lines are what the Queue answered, as dump wrote them.
	Lines []string
}

// Held reports whether the point was reached and every invariant held.
func (r *Result) Held() bool { return r.Reached && len(r.Violations) == 0 }

// String names the scenario and the point.
func (r *Result) String() string {
	switch {
	case r.Point == nil:
		return r.Scenario + " without fault"
	case r.First != nil:
		return r.Scenario + " at " + r.First.String() + " then " + r.Point.String()
	}
	return r.Scenario + " at " + r.Point.String()
}

// Run runs sc once with the fault at p (nil: none) and checks the
// invariants: in process for Fail and Lost, in a child process for Crash,
// CrashAfter, Stall and StallAfter, followed in every case by a restart on the
// same store.
func (h *Harness) Run(ctx context.Context, sc Scenario, p *faults.Point) (*Result, error) {
	st, cleanup, err := h.newStore(sc)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if p != nil && (p.Mode.Kills() || p.Mode.Stalls()) {
		return h.runChild(ctx, sc, st, *p)
	}
	return h.runInProcess(ctx, sc, st, nil, p)
}

// RunAfter runs sc in process with two faults: first, and p at a call made
// after it (the retry of the failed call, a check or cleanup it caused).
// Both must be Fail or Lost.
func (h *Harness) RunAfter(ctx context.Context, sc Scenario, first, p faults.Point) (*Result, error) {
	for _, q := range []faults.Point{first, p} {
		if q.Mode != faults.Fail && q.Mode != faults.Lost {
			return nil, fmt.Errorf("dumpfaults: RunAfter runs fail and lost points in process, not %s", q)
		}
	}
	st, cleanup, err := h.newStore(sc)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	return h.runInProcess(ctx, sc, st, &first, &p)
}

// newStore returns a fresh store for one run.
func (h *Harness) newStore(sc Scenario) (*Store, func(), error) {
	dir, err := h.TempDir()
	if err != nil {
		return nil, nil, fmt.Errorf("dumpfaults: temporary directory: %w", err)
	}
	st := &Store{Dir: dir}
	if sc.Sink.IsS3() {
		if h.S3 == nil {
			return nil, nil, fmt.Errorf("dumpfaults: scenario %s needs Harness.S3", sc.Name)
		}
		st.Server = h.S3
		st.Prefix = "faults/" + s3test.UniquePrefix(strings.ReplaceAll(sc.Name, "/", "-"))
	}
	return st, func() { _ = os.RemoveAll(dir) }, nil
}

func (h *Harness) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

// run is one dump under one fault plan: its injector and the context that
// ends it when the sink is stuck or a Stall hits.
type run struct {
	in     *faults.Injector
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	atFault faults.Counts // the counts when the first fault hit
}

// countsAtFault returns the counts when the first fault hit, nil if none.
func (r *run) countsAtFault() faults.Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.atFault
}

// lineFault is written when the fault hits: "fault POINT".
const lineFault = "fault"

// newRun sets up the injector of a run: it counts the calls, hits the
// points, writes lineFault when one does, ends the run at a Stall and when
// the sink failed stuckAfter times by itself.
func newRun(parent context.Context, points []faults.Point, emit func(string)) *run {
	r := &run{in: faults.New(points...)}
	r.ctx, r.cancel = context.WithCancel(parent)
	var failures atomic.Int64
	var once sync.Once
	r.in.OnFire = func(fp faults.Point) {
		r.mu.Lock()
		if r.atFault == nil {
			r.atFault = r.in.Counts()
		}
		r.mu.Unlock()
		emit(lineFault + " " + fp.String())
		if fp.Mode.Stalls() {
			r.cancel() // the deadline passes while the call hangs
		}
	}
	r.in.Observe = func(e faults.Event) {
		if e.Err == nil || e.Fault != nil || errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, dlqdump.ErrClosed) {
			return
		}
		if failures.Add(1) == stuckAfter {
			once.Do(func() {
				emit(fmt.Sprintf("%s the sink failed %d times after the fault by itself; last: %s #%d: %s", lineStuck, stuckAfter, e.Op, e.K, oneLine(e.Err)))
				r.cancel()
			})
		}
	}
	return r
}

// restart opens a Queue on the store without faults, which recovers what
// the run left, and closes it; closing the Writer again after the Queue
// returns the Queue's answer (sink.Closer), and is a last check that an S3
// Writer uploaded all.
func (h *Harness) restart(ctx context.Context, sc Scenario, st *Store) error {
	w := st.writer(sc, nil, h.logger())
	q, err := dlqdump.NewQueue(sc.config(w))
	if err != nil {
		return fmt.Errorf("restart: NewQueue: %w", err)
	}
	if err := q.Close(); err != nil {
		return fmt.Errorf("restart: Close: %w", err)
	}
	if c, ok := w.(sink.Closer); ok {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := c.Close(cctx); err != nil && !errors.Is(err, dlqdump.ErrClosed) {
			return fmt.Errorf("restart: close the Writer: %w", err)
		}
	}
	return nil
}

// observeAfter restarts on the store and reads it, completing o.
func (h *Harness) observeAfter(ctx context.Context, o *observation, st *Store) error {
	o.restartErr = h.restart(ctx, o.sc, st)
	var err error
	if o.after, err = st.contents(ctx, o.sc); err != nil {
		return fmt.Errorf("dumpfaults: read the store after the restart: %w", err)
	}
	if o.leftover, err = st.leftovers(ctx, o.sc); err != nil {
		return fmt.Errorf("dumpfaults: look for leftovers: %w", err)
	}
	return nil
}
