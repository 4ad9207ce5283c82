package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/backoff"
)

// errClosed means the scene no longer accepts tasks.
var errClosed = errors.New("the queue is closed")

// Scene is one run: a koykov queue with workers, producers feeding it, a
// dlqdump Queue as its DLQ and a Restorer feeding the dump back into it.
type Scene struct {
	app *App
	cfg SceneConfig

	q    *queue.Queue
	qm   *queueMetrics
	dump *dlqdump.Queue
	rst  *dlqdump.Restorer

	// gate orders Enqueue calls before Close: koykov's Close does not wait
	// for an Enqueue that already passed its status check. It also closes
	// the intake in steps: intakeClosed refuses new tasks from producers
	// and POST /enqueue, restorerClosed the Restorer's, closed everything
	// (retries too: the koykov queue is closed).
	gate           sync.RWMutex
	intakeClosed   bool
	restorerClosed bool
	closed         bool

	// pending counts the entries alive: tasks accepted and not yet
	// processed, dumped or lost, wherever they are (the koykov queue, a
	// worker, the retry scheduler). After the intake is closed it only
	// goes down; every decrement signals changed.
	pending atomic.Int64
	changed chan struct{}
	// hurryCh is closed when the scene stops waiting for work: a worker
	// then dumps its task (reason shutdown) instead of processing it, and
	// an attempt in progress is interrupted and dumped.
	hurryCh   chan struct{}
	hurryOnce sync.Once

	busy    atomic.Int64 // workers inside Do
	retries *retryScheduler

	// passCtx bounds the restore passes started from the API (App.Restore):
	// cancelled when the stop has shut the Restorer down, so that no pass
	// delivers into a scene that no longer takes deliveries.
	passCtx    context.Context
	passCancel context.CancelFunc

	prodMu    sync.Mutex
	producers []*producer
	prodUp    atomic.Int64

	started  time.Time
	stopOnce sync.Once
	stopped  chan struct{}
	stopErr  error
	final    sceneTotals // set when stopped
}

// sceneTotals are dlqdump's own counters for one scene.
type sceneTotals struct {
	Dumped, Segments, Restored, Quarantined, Retried uint64
}

func (s *Scene) totals() sceneTotals {
	select {
	case <-s.stopped:
		return s.final
	default:
	}
	ds, rs := s.dump.Stats(), s.rst.Stats()
	return sceneTotals{Dumped: ds.Records, Segments: ds.Segments, Restored: rs.Restored, Quarantined: rs.QuarantinedRecords, Retried: rs.Retried}
}

// newScene builds and starts a scene.
func newScene(app *App, cfg SceneConfig) (*Scene, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Scene{app: app, cfg: cfg, qm: &queueMetrics{}, started: time.Now(), stopped: make(chan struct{}),
		changed: make(chan struct{}, 1), hurryCh: make(chan struct{})}
	codec := taskCodec{st: app.store}
	var err error
	s.dump, err = dlqdump.NewQueue(&dlqdump.Config{
		Version:       dumpVersion,
		Capacity:      dlqdump.MemorySize(cfg.SegmentSize),
		FlushInterval: cfg.Flush.D(),
		MaxPending:    dlqdump.MemorySize(cfg.MaxPending),
		Encoder:       codec,
		Writer:        app.sink.newWriter(), // the Queue owns it: Close stores everything and closes it
		Source:        "demo",
		MetricsWriter: app.mw,
		Logger:        app.logger,
	})
	if err != nil {
		return nil, fmt.Errorf("dumper: %w", err)
	}
	qc := &queue.Config{
		Capacity:      uint64(cfg.Capacity),
		Workers:       uint32(cfg.Workers),
		Worker:        worker{s},
		DLQ:           dlqTap{s},
		FailToDLQ:     true,
		DeadlineToDLQ: true,
		// Retries are scheduled by the demo with backoff (koykov's own
		// MaxRetries re-enqueues at once): a task that exhausted its
		// retries fails for good and goes to the DLQ as "failed".
		MaxRetries:       0,
		DeadlineInterval: cfg.Deadline.D(),
		MetricsWriter:    s.qm,
	}
	if cfg.WorkersMax > cfg.Workers {
		qc.Workers = 0
		qc.WorkersMin, qc.WorkersMax = uint32(cfg.Workers), uint32(cfg.WorkersMax)
		qc.HeartbeatInterval = 100 * time.Millisecond
	}
	s.q, err = queue.New(qc)
	if err != nil {
		_ = s.dump.Close()
		return nil, fmt.Errorf("queue: %w", err)
	}
	s.rst, err = dlqdump.NewRestorer(&dlqdump.Config{
		Version:          dumpVersion,
		Reader:           app.sink.reader,
		Decoder:          codec,
		Queue:            restoreTarget{s},
		CheckInterval:    cfg.RestoreInterval.D(),
		PostponeInterval: cfg.Postpone.D(),
		AllowRate:        float32(cfg.AllowRate),
		RateLimit:        cfg.RestoreRate,
		MaxReplays:       cfg.MaxReplays,
		RetryBase:        20 * time.Millisecond,
		RetryMax:         time.Second,
		MetricsWriter:    app.mw,
		Logger:           app.logger,
	})
	if err != nil {
		_ = s.q.ForceClose()
		_ = s.dump.Close()
		return nil, fmt.Errorf("restorer: %w", err)
	}
	s.retries = newRetryScheduler(s.retryDue)
	s.producers = make([]*producer, cfg.ProducersMax)
	for i := range s.producers {
		s.producers[i] = &producer{s: s, idx: i}
	}
	if _, err := s.setProducers(cfg.Producers); err != nil {
		return nil, err
	}
	if cfg.AutoRestore {
		if err := s.rst.Start(); err != nil {
			return nil, err
		}
	}
	s.passCtx, s.passCancel = context.WithCancel(context.Background())
	return s, nil
}

// dumpVersion is the data version of the demo's records.
var dumpVersion = dlqdump.NewVersion(1, 0, 0, 0)

// entry is one stay of a task in the scene, from the moment it was
// accepted until it is processed, dumped or lost: it travels through the
// koykov queue (which holds entries, not tasks), a worker and the retry
// scheduler. The scene counts live entries (pending), so a stop knows when
// every accepted task has reached its final place.
type entry struct {
	t         *task
	enqueuing atomic.Bool // inside koykov's Enqueue: a leak goes back to the caller
	over      atomic.Bool // released
}

// admit creates the entry of a task entering the scene.
func (s *Scene) admit(t *task) *entry {
	s.pending.Add(1)
	return &entry{t: t}
}

// release ends an entry: its task is processed, dumped, lost, or was not
// accepted after all. A second release of the same entry does nothing.
func (s *Scene) release(e *entry) {
	if !e.over.CompareAndSwap(false, true) {
		return
	}
	s.pending.Add(-1)
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// submit puts t into the queue. from is the state it enters (queued, or
// restored: the Restorer delivers it). A full queue leaks t into the dump,
// which is not an error; an error means t was not accepted anywhere.
func (s *Scene) submit(t *task, from state, note string) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed || s.restorerClosed && from == stRestored || s.intakeClosed && from != stRestored {
		return errClosed
	}
	e := s.admit(t)
	if err := s.enqueueLocked(e, from, note); err != nil {
		s.release(e)
		return err
	}
	return nil
}

// enqueueLocked hands e to the koykov queue; the caller holds the gate
// open (read lock, not closed).
func (s *Scene) enqueueLocked(e *entry, from state, note string) error {
	t := e.t
	t.mu.Lock()
	prev := t.state
	if from == stRestored {
		t.restores++
		t.tries = 0
		t.setLocked(stRestored, note)
	}
	t.final = false
	if d := s.cfg.Deadline.D(); d > 0 {
		t.deadline = time.Now().Add(d)
	} else {
		t.deadline = time.Time{}
	}
	t.mu.Unlock()

	e.enqueuing.Store(true)
	err := s.q.Enqueue(e)
	e.enqueuing.Store(false)

	if err != nil && from == stRestored {
		t.mu.Lock()
		if t.state == stRestored {
			t.restores--
			t.setLocked(prev, "restore refused: "+err.Error())
		}
		t.mu.Unlock()
	}
	return err
}

// hurrying reports whether the scene stopped waiting for work.
func (s *Scene) hurrying() bool {
	select {
	case <-s.hurryCh:
		return true
	default:
		return false
	}
}

// hurry makes the workers dump what they get instead of processing it.
func (s *Scene) hurry() {
	s.hurryOnce.Do(func() { close(s.hurryCh) })
}

// waitSettled waits until no entry is alive, ctx ends or (if stopEarly)
// the scene hurries. It must be called after the intake is closed, when
// pending only goes down.
func (s *Scene) waitSettled(ctx context.Context, stopEarly bool) error {
	hurry := s.hurryCh
	if !stopEarly {
		hurry = nil
	}
	for {
		if s.pending.Load() == 0 {
			return nil
		}
		select {
		case <-s.changed:
		case <-hurry:
			return errHurried
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

var errHurried = errors.New("told to hurry")

// worker is the koykov Worker: it "processes" a task for WorkerDelay and
// fails with probability FailRate. Payloads "!fail" and "!ok" always fail
// and always succeed, "!sleep=DURATION" works that long (for tests and
// curl).
type worker struct{ s *Scene }

func (w worker) Do(x any) error {
	s := w.s
	e, ok := x.(*entry)
	if !ok {
		return nil
	}
	t := e.t
	s.busy.Add(1)
	defer s.busy.Add(-1)
	if s.hurrying() {
		// The scene stopped waiting for work: the task goes to the dump.
		s.deadLetter(e, reasonShutdown)
		return nil
	}
	t.mu.Lock()
	t.attempts++
	t.tries++
	attempt, total := t.tries, t.attempts
	t.setLocked(stRunning, "attempt "+strconv.Itoa(total))
	t.mu.Unlock()

	delay, fail := s.cfg.WorkerDelay.D(), rand.Float64() < s.cfg.FailRate
	switch {
	case t.Payload == "!fail":
		fail = true
	case t.Payload == "!ok":
		fail = false
	case strings.HasPrefix(t.Payload, "!sleep="):
		if d, err := time.ParseDuration(strings.TrimPrefix(t.Payload, "!sleep=")); err == nil && d >= 0 && d <= time.Minute {
			delay, fail = d, false
		}
	}
	if delay > 0 {
		// ±25% so workers do not run in lockstep.
		tm := time.NewTimer(delay*3/4 + rand.N(delay/2+1))
		select {
		case <-tm.C:
		case <-s.hurryCh:
			// A stop that cannot wait: the attempt is abandoned and the
			// task dumped, to be run again after a restore.
			tm.Stop()
			t.mu.Lock()
			t.lastErr = fmt.Sprintf("attempt %d interrupted by the shutdown", total)
			t.mu.Unlock()
			s.deadLetter(e, reasonShutdown)
			return nil
		}
	}
	if !fail {
		t.mu.Lock()
		t.lastErr = ""
		t.setLocked(stDone, "")
		t.mu.Unlock()
		s.app.c.processed.Add(1)
		s.app.store.finished(t)
		s.release(e)
		return nil
	}
	err := fmt.Errorf("attempt %d failed (simulated)", total)
	s.app.c.failures.Add(1)
	t.mu.Lock()
	t.lastErr = err.Error()
	if attempt <= t.MaxRetries {
		d := backoff.FullJitter(s.cfg.BackoffBase.D(), s.cfg.BackoffMax.D(), attempt)
		t.setLocked(stQueued, "retry in "+d.Round(time.Millisecond).String())
		t.mu.Unlock()
		s.app.c.retries.Add(1)
		if s.hurrying() || !s.retries.schedule(e, d) {
			s.deadLetter(e, reasonShutdown) // the scene is stopping
		}
		return nil
	}
	t.final = true
	t.setLocked(stFailed, fmt.Sprintf("%d attempts failed", attempt))
	t.mu.Unlock()
	return err // FailToDLQ: koykov hands the entry to dlqTap, which dumps it
}

// retryDue re-enqueues a task whose backoff ended: the same entry, which
// stayed alive while it waited.
func (s *Scene) retryDue(e *entry) {
	s.gate.RLock()
	if s.closed || s.hurrying() {
		s.gate.RUnlock()
		s.deadLetter(e, reasonShutdown) // the scene is stopping
		return
	}
	err := s.enqueueLocked(e, stQueued, "retry")
	s.gate.RUnlock()
	if err != nil {
		s.deadLetter(e, reasonShutdown)
	}
}

// dlqTap is the koykov queue's DLQ: it records why the task is dead-lettered
// (the task carries it to the dumper as headers) and hands it to the dumper.
type dlqTap struct{ s *Scene }

func (d dlqTap) Enqueue(x any) error {
	e, ok := x.(*entry)
	if !ok {
		return d.s.dump.Enqueue(x)
	}
	t := e.t
	t.mu.Lock()
	reason := reasonLeak
	switch {
	case t.final:
		reason = reasonFailed
	case !t.deadline.IsZero() && !time.Now().Before(t.deadline):
		reason = reasonDeadline
	}
	returned := reason == reasonLeak && e.enqueuing.Load() // the caller of submit sees the error
	t.mu.Unlock()
	err := d.s.dumpTask(t, reason, returned)
	if err == nil || !returned {
		d.s.release(e) // dumped, or lost and counted; a refused leak is the caller's
	}
	return err
}

// deadLetter dumps a task outside the koykov queue (a worker or a retry at
// shutdown) and ends its entry: dumped, or lost and counted so.
func (s *Scene) deadLetter(e *entry, reason string) {
	_ = s.dumpTask(e.t, reason, false)
	s.release(e)
}

// dumpTask hands t to the dumper. If the dumper refuses and the error goes
// back to a caller (returned), the task is that caller's; otherwise it is
// lost, and counted so.
func (s *Scene) dumpTask(t *task, reason string, returned bool) error {
	t.mu.Lock()
	prevState, prevReason := t.state, t.reason
	t.reason = reason
	t.dumps++
	t.setLocked(stDumped, reason)
	t.mu.Unlock()
	err := s.dump.Enqueue(t)
	if err == nil {
		s.app.c.leaked[reasonIndex(reason)].Add(1)
		return nil
	}
	t.mu.Lock()
	t.dumps--
	t.reason = prevReason
	if returned {
		t.setLocked(prevState, "dump refused: "+err.Error())
	} else {
		t.lastErr = "dump refused: " + err.Error()
		t.setLocked(stFailed, "lost: the dump refused it")
	}
	t.mu.Unlock()
	if !returned {
		s.app.c.dumpLost.Add(1)
		s.app.logf("LOST task %s: the dump refused it: %v", t.ID, err)
	}
	return err
}

func reasonIndex(r string) int {
	for i, v := range reasons {
		if v == r {
			return i
		}
	}
	return 0
}

// restoreTarget is the Restorer's destination: the scene's queue, with its
// Rate for AllowRate.
type restoreTarget struct{ s *Scene }

func (r restoreTarget) Enqueue(x any) error {
	t, ok := x.(*task)
	if !ok {
		return fmt.Errorf("demo: cannot restore %T", x)
	}
	err := r.s.submit(t, stRestored, "")
	if err == nil {
		r.s.app.c.restored.Add(1)
	}
	return err
}

func (r restoreTarget) Rate() float32 { return r.s.q.Rate() }

// idle reports whether nothing is in the queue, in a worker or waiting for a
// retry: no accepted task is still on its way.
func (s *Scene) idle() bool {
	return s.pending.Load() == 0
}

// stop shuts the scene down; every task it accepted ends processed or in
// the dump, and an error counts any that did not.
//
// Graceful: the producers stop and POST /enqueue is refused (503), the
// Restorer stops, and the workers finish what was accepted (retries
// included) while ctx lasts. When ctx ends first, or App.Hurry is called,
// the scene stops waiting: what is queued, running or waiting for a retry
// goes to the dump with reason "shutdown" (an attempt in progress is
// abandoned). Force: the same without waiting. Then the koykov queue is
// closed and the dumper shut down, so what was dumped is written.
func (s *Scene) stop(ctx context.Context, force bool) error {
	s.stopOnce.Do(func() {
		s.stopErr = s.doStop(ctx, force)
	})
	return s.stopErr
}

func (s *Scene) doStop(ctx context.Context, force bool) error {
	var errs []error
	_, _ = s.setProducers(0)
	s.gate.Lock()
	s.intakeClosed = true
	s.gate.Unlock()
	if force {
		s.hurry()
	}

	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if force {
		cancel()
		rctx, cancel = context.WithTimeout(ctx, time.Second)
	}
	// Force: a pass that does not stop within a second is cancelled; its
	// claim expires and the next restorer resumes at its checkpoint.
	if err := s.rst.Shutdown(rctx); err != nil && !errors.Is(err, dlqdump.ErrClosed) && !force {
		errs = append(errs, fmt.Errorf("restorer: %w", err))
	}
	cancel()
	s.passCancel() // a pass started from the API that is still running
	s.gate.Lock()
	s.restorerClosed = true
	s.gate.Unlock()

	// From here no entry is created: pending only goes down.
	if err := s.waitSettled(ctx, true); err != nil {
		n := s.pending.Load()
		s.hurry()
		why := "the workers did not finish in time (" + err.Error() + ")"
		if errors.Is(err, errHurried) {
			why = "told not to wait for the workers"
		}
		if n > 0 && !force {
			s.app.logf("graceful stop: %s: %d accepted tasks still queued, running or waiting for a retry go to the dump (reason %s)",
				why, n, reasonShutdown)
		}
	}
	s.gate.Lock()
	s.closed = true
	_ = s.q.Close() // workers drain what is left (hurrying: into the dump)
	s.gate.Unlock()
	for _, e := range s.retries.stop() {
		s.deadLetter(e, reasonShutdown)
	}
	// Dumping takes no I/O; this bound is for a dumper that stays full.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	if err := s.waitSettled(wctx, false); err != nil {
		n := s.pending.Load()
		s.app.c.unaccounted.Add(uint64(n))
		s.app.logf("LOST %d accepted tasks: neither processed nor dumped when the scene stopped (%v)", n, err)
		errs = append(errs, fmt.Errorf("%d accepted tasks were neither processed nor dumped when the scene stopped: %w", n, err))
	}
	cancel()

	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	if err := s.dump.Shutdown(dctx); err != nil {
		errs = append(errs, fmt.Errorf("dumper: %w", err))
	}
	cancel()
	ds, rs := s.dump.Stats(), s.rst.Stats()
	s.final = sceneTotals{Dumped: ds.Records, Segments: ds.Segments, Restored: rs.Restored, Quarantined: rs.QuarantinedRecords, Retried: rs.Retried}
	close(s.stopped)
	return errors.Join(errs...)
}
