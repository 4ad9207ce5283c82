package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// Runner runs the due jobs of a store, any number of runners, in any number
// of processes, sharing the store: they coordinate through it alone. Each
// job is claimed, as a restorer claims a segment (a lease, renewed, taken
// over once its holder stops renewing it), run by one pass of one of the
// Runner's Restorers (so as many jobs at once as it has Restorers), and its
// progress written at least every ProgressInterval and before every
// checkpoint of its segments, so that a job whose runner died is taken over
// from there (a block delivered twice at most). A runner takes
// only the jobs whose destination its Restorers serve (dlqdump.Config
// Destinations).
//
// One goroutine, started by Start and stopped by Close, lists the jobs due
// within the next PollInterval once a PollInterval, and starts each at its
// turn: at its second for the runner that ranks first for it among the
// runners heard from lately (their heartbeats), a hand-off of 100 ms later
// for each rank after, so that a job is looked at by one runner unless that
// one is busy or gone.
type Runner struct {
	store   *Store
	claimer *claims.Claimer
	o       RunnerOptions
	log     *slog.Logger
	met     Metrics

	free        chan *dlqdump.Restorer // the Restorers not running a job
	n           int
	one         *dlqdump.Restorer // any of them: they serve the same destinations
	dests       []string          // those destinations
	ctx         context.Context   // the jobs', cancelled by Close: they stop at their next record
	poller      context.Context   // the polling's, cancelled by Close first
	stopPolling context.CancelFunc
	polled      chan struct{} // closed when the polling goroutine ended

	mu       sync.Mutex
	running  map[string]*execution // jobs this runner runs
	orphans  map[string]time.Time  // due markers without a job, since
	held     map[string]heldJob    // jobs other runners run: not looked at again until then, by this marker
	moved    time.Time             // when the markers due soon were last moved into "jobsdue"
	peers    []string              // the owners of the other runners heard from lately
	stamp    string                // the due markers' stamp read before the last listing
	listTook time.Duration         // what the last listing took

	pollMu  sync.Mutex  // serialises polls; guards what follows
	listing []candidate // the due markers the last listing read and no poll took since
	listed  time.Time   // when
	partial bool        // it stopped at maxCandidates
	started bool
	closed  bool
	cancel  context.CancelFunc // cancels ctx
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
	// PollInterval is how often the runner lists the jobs due (within the
	// next PollInterval, which it starts at their turns): a job created
	// due now, or handed over by a runner that stopped, starts within it.
	// On a store that tells cheaply that its due jobs changed (a
	// directory: the modification time of its due markers' directory,
	// read every 20 ms), and for the jobs created through the runner's own
	// Store, an idle runner lists them at once instead. Default 500ms: on
	// S3, two listing requests a second per runner (172,800 a day), and a
	// job handed over starts within about half a second (1s halves the
	// requests and doubles the delays; 100ms costs 10 a second and starts
	// a job within a few tens of milliseconds). A runner behind a backlog
	// of more due jobs than a listing holds (256) lists again once it
	// has taken those, or every 4 PollIntervals.
	PollInterval time.Duration
	// ProgressInterval is how often a running job's record is written
	// (its counts, their time and its velocity), besides before every
	// checkpoint of the segments it restores: a pause or cancel written
	// into the record is learnt by that write, and the job stops at its
	// next record. So a request takes effect within about this long, and
	// a running job costs a write of its record this often (on S3, a PUT).
	// Default 500ms.
	ProgressInterval time.Duration
	// Heartbeat is how often the runner says, in the store, which
	// destinations it serves (Store.Runners, `dlqdump job show`).
	// Default 10s.
	Heartbeat time.Duration
	// RetryBase bounds the first wait before a job whose pass failed is
	// run again; the bound doubles with every attempt, up to 5 minutes,
	// and the wait is drawn at random below it (full jitter). Default 1s.
	RetryBase time.Duration
	// WaitHeld is how long a job's pass waits for a segment it selects
	// from that another restorer holds (another job's pass over the same
	// segment, typically) before the pass ends and the job is tried again
	// after a poll: the pass goes on with its other segments and then
	// waits for those (dlqdump.RunOptions.WaitClaimed), so jobs over one
	// store take one pass each instead of ending theirs on each other's
	// segments. A pause or cancel ends the wait at once. Negative: no
	// wait. Default 1 minute, longer than a Restorer's default lease, so
	// that a holder that died is taken over within the wait.
	WaitHeld time.Duration
	// Logger receives a line, with the job's counts, when a job starts,
	// is taken over, is paused, cancelled or handed over, completes,
	// fails, or waits for a retry. Default: discard.
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
		o.PollInterval = 500 * time.Millisecond
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 500 * time.Millisecond
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.WaitHeld == 0 {
		o.WaitHeld = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	rn := &Runner{store: st, o: o, n: len(restorers), met: o.Metrics,
		log:  o.Logger.With(slog.String("component", "dlqdump.jobs.Runner"), slog.String("owner", o.Owner)),
		free: make(chan *dlqdump.Restorer, len(restorers)), running: map[string]*execution{}, orphans: map[string]time.Time{}, held: map[string]heldJob{},
		wake: make(chan struct{}, 1)}
	for _, r := range restorers {
		if r == nil {
			return nil, fmt.Errorf("%w: jobs.NewRunner: a nil Restorer", dlqdump.ErrConfig)
		}
		rn.free <- r
	}
	rn.one = restorers[0]
	rn.dests = rn.one.Destinations()
	var err error
	rn.claimer, err = claims.NewRecordClaimer(st.t, o.Owner, o.Lease, &claims.Options{Logger: rn.log})
	if err != nil {
		return nil, err
	}
	rn.ctx, rn.cancel = context.WithCancel(context.Background())
	rn.poller = rn.ctx
	rn.polled = make(chan struct{})
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
	go rn.loop(rn.poller)
	return nil
}

// Close hands the runner's jobs over and stops: the polling stops, each job
// running stops at its next record (the deliveries in flight end), is made
// pending again, due at once under a new due marker (a runner that saw it
// run looks at it again at its next poll), and released, so that a runner
// takes it on; meanwhile its heartbeat is removed. It waits for them. A
// second call returns dlqdump.ErrClosed.
func (rn *Runner) Close() error {
	rn.mu.Lock()
	if rn.closed {
		rn.mu.Unlock()
		return dlqdump.ErrClosed
	}
	rn.closed = true
	started := rn.started
	rn.mu.Unlock()
	rn.cancel() // the polling, and the jobs: they stop at their next record
	rn.mu.Lock()
	for _, x := range rn.running {
		x.stop(errClosing) // now, not once the context's functions run
	}
	rn.mu.Unlock()
	if started {
		<-rn.polled
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	err := rn.store.dropRunner(ctx, rn.o.Owner)
	rn.wg.Wait()
	return err
}

// noticeEvery is how often an idle runner reads whether the due markers
// changed, on a store that tells it cheaply (sink.Stamper).
const noticeEvery = 20 * time.Millisecond

// loop is the polling goroutine.
func (rn *Runner) loop(ctx context.Context) {
	defer close(rn.polled)
	t := time.NewTimer(0)
	defer t.Stop()
	var notice <-chan time.Time
	stamper, _ := rn.store.due.(sink.Stamper)
	if stamper != nil {
		tk := time.NewTicker(noticeEvery)
		defer tk.Stop()
		notice = tk.C
	}
	var beat time.Time
	for {
		fresh := false
		select {
		case <-t.C:
		case <-rn.wake:
		case <-rn.store.createdNow():
			fresh = true // made through this runner's Store
		case <-notice:
			if fresh = rn.changed(ctx, stamper); !fresh {
				continue
			}
		case <-ctx.Done():
			return
		}
		if time.Since(beat) >= rn.o.Heartbeat {
			if err := rn.store.beat(ctx, rn.o.Owner, rn.dests, rn.o.Heartbeat); err != nil && ctx.Err() == nil {
				rn.log.Debug("writing the runner's heartbeat failed", slog.Any("error", err))
			}
			rn.hearPeers(ctx)
			beat = time.Now()
		}
		next, err := rn.poll(ctx, fresh)
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

// RunDue lists the due jobs and starts those a free Restorer can take now,
// and returns when the runner looks again (zero if it saw none). The jobs run in the
// background, until they end or Close stops them (ctx bounds the listing
// alone). Start calls it every PollInterval. After Close it returns
// dlqdump.ErrClosed.
func (rn *Runner) RunDue(ctx context.Context) (next time.Time, err error) {
	rn.mu.Lock()
	closed := rn.closed
	rn.mu.Unlock()
	if closed {
		return time.Time{}, dlqdump.ErrClosed
	}
	return rn.poll(ctx, true)
}

// consider starts the job of a due marker, if it should run here and now.
func (rn *Runner) consider(ctx context.Context, key string, at time.Time, id string) error {
	seen, err := rn.claimer.Look(ctx, jobKey(id))
	if err != nil {
		return err
	}
	rec, live := seen.Record, seen.Live
	if rec == nil {
		return rn.orphan(ctx, key, at, id)
	}
	rn.mu.Lock()
	delete(rn.orphans, key)
	rn.mu.Unlock()
	var job Job
	if err := json.Unmarshal(rec.Progress, &job); err != nil || job.ID != id || !slices.Contains(States, job.State) {
		return rn.claimAndRun(ctx, key, at, seen, nil) // damaged: failed, with the reason
	}
	switch {
	case job.State.Final() && time.Since(job.Finished) < rn.o.Lease:
		rn.hold(id, key) // the runner that ended it is removing its marker
		return nil
	case job.State.Final():
		return rn.store.dropMarker(ctx, at, id) // left by an end whose removal failed
	case job.State == Paused || !job.Due().Equal(at):
		// Left by a pause or a new due time, unless a resume or a
		// reschedule is writing it again.
		return rn.store.dropStale(ctx, at, id)
	case live && rec.Held():
		rn.hold(id, key) // run by another runner
		return nil
	case !rn.one.Serves(job.Spec.Destination):
		rn.hold(id, key) // for a runner that serves its destination
		return nil
	}
	return rn.claimAndRun(ctx, key, at, seen, &job)
}

// dropMarker removes the due marker of a job that ended, logging a
// failure (a runner removes it later).
func (rn *Runner) dropMarker(at time.Time, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	if err := rn.store.dropMarker(ctx, at, id); err != nil {
		rn.log.Debug("removing a job's due marker failed; a runner removes it later", slog.String("job", id), slog.Any("error", err))
	}
}

// dropStale removes a due marker the job's record may no longer want (see
// Store.dropStale), logging a failure.
func (rn *Runner) dropStale(at time.Time, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), endDeadline)
	defer cancel()
	if err := rn.store.dropStale(ctx, at, id); err != nil {
		rn.log.Debug("removing a job's stale due marker failed; a runner removes it later", slog.String("job", id), slog.Any("error", err))
	}
}

// hold notes that another runner runs job id, found by its marker key: its
// record is looked at again half a lease later (a poll reads what is due and
// not known to be run), so that a holder that stopped renewing is seen to
// have within two looks, a lease and a half after it stopped at most; or at
// once when it has another marker (its runner handed it over, made it due
// again).
func (rn *Runner) hold(id, key string) {
	now := time.Now()
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.held[id] = heldJob{until: now.Add(rn.o.Lease / 2), key: key}
	if len(rn.held) > 1024 {
		for k, h := range rn.held {
			if now.After(h.until) {
				delete(rn.held, k)
			}
		}
	}
}

// heldJob is a job another runner runs, as a poll found it.
type heldJob struct {
	until time.Time // looked at again then
	key   string    // its due marker then
}

// orphan handles a due marker whose job has no record: a Create that
// stopped between the two writes. Once seen so for a lease, the marker is
// removed (and put back if the record appeared meanwhile).
func (rn *Runner) orphan(ctx context.Context, key string, at time.Time, id string) error {
	rn.mu.Lock()
	since, seen := rn.orphans[key]
	if !seen {
		now := time.Now()
		rn.orphans[key] = now
		if len(rn.orphans) > 1024 {
			for k, t := range rn.orphans {
				if now.Sub(t) > 2*rn.o.Lease {
					delete(rn.orphans, k) // seen again if still there
				}
			}
		}
	}
	rn.mu.Unlock()
	if !seen || time.Since(since) < rn.o.Lease {
		return nil
	}
	rn.mu.Lock()
	delete(rn.orphans, key)
	rn.mu.Unlock()
	return rn.store.dropStale(ctx, at, id) // put back if the record appeared meanwhile
}

// claimAndRun claims the job whose record was seen, found by its due marker
// key (due at), if unchanged since, and runs it on a free Restorer in the
// background; job is what the record holds, nil for a record that holds
// none (it is failed). A job due to start is claimed and marked running in
// one write.
func (rn *Runner) claimAndRun(ctx context.Context, key string, at time.Time, seen claims.Seen, job *Job) error {
	var r *dlqdump.Restorer
	select {
	case r = <-rn.free:
	default:
		return nil // still due: taken when a Restorer frees
	}
	id := strings.TrimPrefix(seen.Name, jobKind)
	var progress json.RawMessage
	var running *Job
	if job != nil && seen.Record.Control == "" && (job.State == Pending || job.State == Running) {
		running = new(Job)
		*running = *job
		running.begin(rn.o.Owner, time.Now().UTC())
		var err error
		if progress, err = json.Marshal(running); err != nil {
			rn.free <- r
			return err
		}
	}
	if rn.ctx.Err() != nil {
		rn.free <- r
		return nil // closing
	}
	// The claim's write is not cut short by Close: one cut short after it
	// took effect would leave the job held by a runner that never runs
	// it, until its lease ran out. A claim that lands during Close is
	// handed over at once (the execution's stop is done already).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endDeadline)
	cl, err := rn.claimer.ClaimSeen(cctx, seen, progress)
	cancel()
	if err != nil {
		rn.free <- r
		if errors.Is(err, claims.ErrClaimed) {
			rn.hold(id, key)
			return nil
		}
		return err
	}
	x := newExecution(rn.ctx, rn, r, cl, id, at)
	rn.mu.Lock()
	rn.running[id] = x
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
		if running != nil {
			x.runStarted(running, job.State == Running)
			return
		}
		x.run(job)
	}()
	return nil
}
