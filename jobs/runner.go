package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
)

// Runner runs the due jobs of a store, any number of runners, in any number
// of processes, sharing the store: they coordinate through it alone. Each
// job is claimed, as a restorer claims a segment (a lease, renewed, taken
// over once its holder stops renewing it), run by one pass of one of the
// Runner's Restorers (so as many jobs at once as it has Restorers), and its
// progress written after every block, so that a job whose runner died is
// taken over from there (a block delivered twice at most). A runner takes
// only the jobs whose destination its Restorers serve (dlqdump.Config
// Destinations).
//
// One goroutine, started by Start and stopped by Close, polls the store:
// every PollInterval, and when the next job it knows of is due.
type Runner struct {
	store   *Store
	claimer *claims.Claimer
	o       RunnerOptions
	log     *slog.Logger
	met     Metrics

	free chan *dlqdump.Restorer // the Restorers not running a job
	n    int

	mu      sync.Mutex
	running map[string]bool      // jobs this runner runs
	orphans map[string]time.Time // due markers without a job, since
	held    map[string]time.Time // jobs other runners run: not looked at again until then
	moved   time.Time            // when the markers due soon were last moved into "jobsdue"
	started bool
	closed  bool
	cancel  context.CancelFunc
	wake    chan struct{}
	wg      sync.WaitGroup
}

// RunnerOptions tune a Runner.
type RunnerOptions struct {
	// Owner labels the runner in jobs' records and logs. Default: the
	// host name, the process ID and a random number.
	Owner string
	// Lease is the lease of the runner's claims on jobs: another runner
	// takes a job over once it has seen its record unchanged for this
	// long. Default 30s.
	Lease time.Duration
	// PollInterval is how often the runner lists the due jobs, at most;
	// it also wakes when the next job it knows of is due. Default 1s.
	PollInterval time.Duration
	// Heartbeat is how often the runner says, in the store, which
	// destinations it serves (Store.Runners, `dlqdump job show`).
	// Default 10s.
	Heartbeat time.Duration
	// RetryBase bounds the first wait before a job whose pass failed is
	// run again; the bound doubles with every attempt, up to 5 minutes,
	// and the wait is drawn at random below it (full jitter). Default 1s.
	RetryBase time.Duration
	// Logger receives a line when a job starts, is taken over, pauses,
	// finishes or fails. Default: discard.
	Logger *slog.Logger
	// Metrics receives the jobs' starts and ends (package
	// metrics/prometheus implements it). Default: none.
	Metrics Metrics
}

// Metrics is told of jobs as they start and end.
type Metrics interface {
	// JobStarted is called when a job starts or is taken over, with how
	// late after it was due it first started.
	JobStarted(late time.Duration, takenOver bool)
	// JobEnded is called when a runner lets a job it started go: state
	// is the state it left it in ("completed", "failed", "cancelled",
	// "paused" or "pending"), delivered the records the job delivered
	// while this runner held it.
	JobEnded(state string, delivered uint64)
}

// NewRunner returns a Runner of the jobs of st, run by the restorers (one
// job each at a time). The restorers must serve the same destinations.
func NewRunner(st *Store, restorers []*dlqdump.Restorer, opts *RunnerOptions) (*Runner, error) {
	if st == nil || len(restorers) == 0 {
		return nil, fmt.Errorf("%w: jobs.NewRunner: a Store and at least one Restorer", dlqdump.ErrConfig)
	}
	var o RunnerOptions
	if opts != nil {
		o = *opts
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	rn := &Runner{store: st, o: o, n: len(restorers), met: o.Metrics,
		log:  o.Logger.With(slog.String("component", "dlqdump.jobs.Runner"), slog.String("owner", o.Owner)),
		free: make(chan *dlqdump.Restorer, len(restorers)), running: map[string]bool{}, orphans: map[string]time.Time{}, held: map[string]time.Time{},
		wake: make(chan struct{}, 1)}
	for _, r := range restorers {
		if r == nil {
			return nil, fmt.Errorf("%w: jobs.NewRunner: a nil Restorer", dlqdump.ErrConfig)
		}
		rn.free <- r
	}
	var err error
	rn.claimer, err = claims.NewRecordClaimer(st.t, o.Owner, o.Lease, &claims.Options{Logger: rn.log})
	if err != nil {
		return nil, err
	}
	return rn, nil
}

// Owner returns the runner's owner label.
func (rn *Runner) Owner() string { return rn.o.Owner }

// Start starts polling the store in the background, until Close.
func (rn *Runner) Start() error {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.closed {
		return dlqdump.ErrClosed
	}
	if rn.started {
		return errors.New("dlqdump: jobs.Runner already started")
	}
	rn.started = true
	ctx, cancel := context.WithCancel(context.Background())
	rn.cancel = cancel
	rn.wg.Add(1)
	go rn.loop(ctx)
	return nil
}

// Close stops the polling and the jobs running: each stops at its next
// record, is made pending again (due at once) and released, so that a
// runner takes it on. It waits for them. A second call returns
// dlqdump.ErrClosed.
func (rn *Runner) Close() error {
	rn.mu.Lock()
	if rn.closed {
		rn.mu.Unlock()
		return dlqdump.ErrClosed
	}
	rn.closed = true
	cancel := rn.cancel
	rn.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	rn.wg.Wait()
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	return rn.store.dropRunner(ctx, rn.o.Owner)
}

// loop is the polling goroutine.
func (rn *Runner) loop(ctx context.Context) {
	defer rn.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	var beat time.Time
	for {
		select {
		case <-t.C:
		case <-rn.wake:
		case <-ctx.Done():
			return
		}
		if time.Since(beat) >= rn.o.Heartbeat {
			if err := rn.store.beat(ctx, rn.o.Owner, rn.serves(), rn.o.Heartbeat); err != nil && ctx.Err() == nil {
				rn.log.Debug("writing the runner's heartbeat failed", slog.Any("error", err))
			}
			beat = time.Now()
		}
		next, err := rn.poll(ctx)
		if err != nil && ctx.Err() == nil {
			rn.log.Warn("polling for due jobs failed; retrying", slog.Any("error", err))
		}
		wait := rn.o.PollInterval
		if !next.IsZero() {
			wait = min(wait, max(time.Until(next), 0))
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// serves returns the destinations the runner's Restorers serve, as far as
// their configs say ("" for their Queue).
func (rn *Runner) serves() []string {
	r := <-rn.free
	rn.free <- r
	return r.Destinations()
}

// RunDue starts the jobs due now that a free Restorer can take, and returns
// when the next job it saw is due (zero if none). The jobs run in the
// background; Close stops them. Start calls it every PollInterval.
func (rn *Runner) RunDue(ctx context.Context) (next time.Time, err error) {
	return rn.poll(ctx)
}

// poll lists the due markers from the first and starts the jobs it can;
// every tenth of the horizon, it first moves the markers that came within
// it into "jobsdue".
func (rn *Runner) poll(ctx context.Context) (next time.Time, err error) {
	now := time.Now()
	rn.mu.Lock()
	promote := now.Sub(rn.moved) >= horizon/promoteEvery
	rn.mu.Unlock()
	if promote {
		n, err := rn.store.promote(ctx, now.Add(horizon))
		if err != nil {
			return next, fmt.Errorf("dlqdump: moving the jobs due within the hour: %w", err)
		}
		rn.mu.Lock()
		rn.moved = now
		rn.mu.Unlock()
		if n > 0 {
			rn.log.Debug("jobs now due within the hour", slog.Int("jobs", n))
		}
	}
	for key, err := range rn.store.due.RecordNames(ctx) {
		if err != nil {
			return next, err
		}
		at, id, ok := parseDueKey(key)
		if !ok {
			continue
		}
		if at.After(now) {
			return at, nil // the first job due later: stop listing
		}
		rn.mu.Lock()
		busy := rn.running[id] || now.Before(rn.held[id])
		rn.mu.Unlock()
		if busy {
			continue
		}
		if len(rn.free) == 0 {
			return now.Add(rn.o.PollInterval), nil // woken when a Restorer frees
		}
		if err := rn.consider(ctx, key, at, id); err != nil && ctx.Err() == nil {
			rn.log.Warn("a due job could not be started", slog.String("job", id), slog.Any("error", err))
		}
	}
	return next, nil
}

// consider starts the job of a due marker, if it should run here and now.
func (rn *Runner) consider(ctx context.Context, key string, at time.Time, id string) error {
	rec, live, err := rn.claimer.Inspect(ctx, jobKey(id))
	if err != nil {
		return err
	}
	if rec == nil {
		return rn.orphan(ctx, key, at, id)
	}
	var job Job
	if err := json.Unmarshal(rec.Progress, &job); err != nil || job.ID != id {
		return rn.claimAndRun(ctx, id, nil) // damaged: failed, with the reason
	}
	switch {
	case job.State.Final() || job.State == Paused || !job.At.Equal(at):
		// A marker left by an end, a pause or a new due time.
		return rn.store.dropMarker(ctx, at, id)
	case live && rec.Held():
		rn.hold(id) // run by another runner
		return nil
	case !rn.servesDest(job.Spec.Destination):
		return nil // for a runner that serves its destination
	}
	return rn.claimAndRun(ctx, id, &job)
}

func (rn *Runner) servesDest(dest string) bool {
	r := <-rn.free
	rn.free <- r
	return r.Serves(dest)
}

// hold notes that another runner runs job id: its record is looked at again
// a third of a lease later, when a holder that stopped renewing may be
// seen to have (a poll reads what is due and not known to be run).
func (rn *Runner) hold(id string) {
	now := time.Now()
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.held[id] = now.Add(rn.o.Lease / 3)
	if len(rn.held) > 1024 {
		for k, until := range rn.held {
			if now.After(until) {
				delete(rn.held, k)
			}
		}
	}
}

// orphan handles a due marker whose job has no record: a Create that
// stopped between the two writes. Once seen so for a lease, the marker is
// removed (and put back if the record appeared meanwhile).
func (rn *Runner) orphan(ctx context.Context, key string, at time.Time, id string) error {
	rn.mu.Lock()
	since, seen := rn.orphans[key]
	if !seen {
		rn.orphans[key] = time.Now()
	}
	rn.mu.Unlock()
	if !seen || time.Since(since) < rn.o.Lease {
		return nil
	}
	rn.mu.Lock()
	delete(rn.orphans, key)
	rn.mu.Unlock()
	if err := rn.store.dropMarker(ctx, at, id); err != nil {
		return err
	}
	if j, err := rn.store.Get(ctx, id); err == nil {
		return rn.store.ensureMarker(ctx, &j)
	}
	return nil
}

// claimAndRun claims a job and runs it on a free Restorer in the
// background; job is nil for a record that holds none (it is failed).
func (rn *Runner) claimAndRun(ctx context.Context, id string, job *Job) error {
	cl, err := rn.claimer.Claim(ctx, jobKey(id))
	if errors.Is(err, claims.ErrClaimed) {
		rn.hold(id)
		return nil
	}
	if err != nil {
		return err
	}
	var r *dlqdump.Restorer
	select {
	case r = <-rn.free:
	default:
		_ = cl.Release(ctx) // taken meanwhile: released, still due
		return nil
	}
	rn.mu.Lock()
	rn.running[id] = true
	rn.mu.Unlock()
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		defer func() {
			rn.mu.Lock()
			delete(rn.running, id)
			rn.mu.Unlock()
			rn.free <- r
			select {
			case rn.wake <- struct{}{}:
			default:
			}
		}()
		x := &execution{rn: rn, r: r, cl: cl, id: id}
		x.run(ctx, job)
	}()
	return nil
}
