package main

import (
	"container/heap"
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
	// for an Enqueue that already passed its status check.
	gate   sync.RWMutex
	closed bool

	busy    atomic.Int64 // workers inside Do
	retries *retryScheduler

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
	s := &Scene{app: app, cfg: cfg, qm: &queueMetrics{}, started: time.Now(), stopped: make(chan struct{})}
	codec := taskCodec{st: app.store}
	var err error
	s.dump, err = dlqdump.NewQueue(&dlqdump.Config{
		Version:       dumpVersion,
		Capacity:      dlqdump.MemorySize(cfg.SegmentSize),
		FlushInterval: cfg.Flush.D(),
		MaxPending:    dlqdump.MemorySize(cfg.MaxPending),
		Encoder:       codec,
		Writer:        app.sink.writer,
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
	return s, nil
}

// dumpVersion is the data version of the demo's records.
var dumpVersion = dlqdump.NewVersion(1, 0, 0, 0)

// submit puts t into the queue. from is the state it enters (queued or
// restored). A full queue leaks t into the dump, which is not an error; an
// error means t was not accepted anywhere.
func (s *Scene) submit(t *task, from state, note string) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed {
		return errClosed
	}
	t.mu.Lock()
	prev := t.state
	if from == stRestored {
		t.restores++
		t.tries = 0
		t.setLocked(stRestored, note)
	}
	t.final = false
	t.enqueuing = true
	if d := s.cfg.Deadline.D(); d > 0 {
		t.deadline = time.Now().Add(d)
	} else {
		t.deadline = time.Time{}
	}
	t.mu.Unlock()

	err := s.q.Enqueue(t)

	t.mu.Lock()
	t.enqueuing = false
	if err != nil && from == stRestored && t.state == stRestored {
		t.restores--
		t.setLocked(prev, "restore refused: "+err.Error())
	}
	t.mu.Unlock()
	return err
}

// worker is the koykov Worker: it "processes" a task for WorkerDelay and
// fails with probability FailRate. Payloads "!fail" and "!ok" always fail
// and always succeed, "!sleep=DURATION" works that long (for tests and
// curl).
type worker struct{ s *Scene }

func (w worker) Do(x any) error {
	s := w.s
	t, ok := x.(*task)
	if !ok {
		return nil
	}
	s.busy.Add(1)
	defer s.busy.Add(-1)
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
		time.Sleep(delay*3/4 + rand.N(delay/2+1))
	}
	if !fail {
		t.mu.Lock()
		t.lastErr = ""
		t.setLocked(stDone, "")
		t.mu.Unlock()
		s.app.c.processed.Add(1)
		s.app.store.finished(t)
		return nil
	}
	err := fmt.Errorf("attempt %d failed (simulated)", total)
	s.app.c.failures.Add(1)
	t.mu.Lock()
	t.lastErr = err.Error()
	if attempt <= t.MaxRetries {
		d := backoff(attempt, s.cfg.BackoffBase.D(), s.cfg.BackoffMax.D())
		t.setLocked(stQueued, "retry in "+d.Round(time.Millisecond).String())
		t.mu.Unlock()
		s.app.c.retries.Add(1)
		if !s.retries.schedule(t, d) {
			s.deadLetter(t, reasonShutdown) // the scene is stopping
		}
		return nil
	}
	t.final = true
	t.setLocked(stFailed, fmt.Sprintf("%d attempts failed", attempt))
	t.mu.Unlock()
	return err // FailToDLQ: koykov hands the task to the dumper
}

// backoff is the delay before retry n (1-based): exponential with full
// jitter, uniformly in [0, min(base*2^(n-1), max)].
func backoff(n int, base, maxDelay time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return rand.N(min(d, maxDelay) + 1)
}

// retryDue re-enqueues a task whose backoff ended.
func (s *Scene) retryDue(t *task) {
	if err := s.submit(t, stQueued, "retry"); err != nil {
		// The queue closed while the retry waited: dump it.
		s.deadLetter(t, reasonShutdown)
	}
}

// dlqTap is the koykov queue's DLQ: it records why the task is dead-lettered
// (the task carries it to the dumper as headers) and hands it to the dumper.
type dlqTap struct{ s *Scene }

func (d dlqTap) Enqueue(x any) error {
	t, ok := x.(*task)
	if !ok {
		return d.s.dump.Enqueue(x)
	}
	t.mu.Lock()
	reason := reasonLeak
	switch {
	case t.final:
		reason = reasonFailed
	case !t.deadline.IsZero() && !time.Now().Before(t.deadline):
		reason = reasonDeadline
	}
	returned := reason == reasonLeak && t.enqueuing // the caller of submit sees the error
	t.mu.Unlock()
	return d.s.dumpTask(t, reason, returned)
}

// deadLetter dumps a task outside the queue (a retry after the queue closed).
func (s *Scene) deadLetter(t *task, reason string) {
	_ = s.dumpTask(t, reason, false)
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
	return r.s.submit(t, stRestored, "")
}

func (r restoreTarget) Rate() float32 { return r.s.q.Rate() }

// producer generates tasks at cfg.Rate per second while running.
type producer struct {
	s    *Scene
	idx  int
	stop chan struct{}
	done chan struct{}
}

func (p *producer) run() {
	defer close(p.done)
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	perTick := p.s.cfg.Rate * tick.Seconds()
	var owed float64
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		owed += perTick
		for ; owed >= 1; owed-- {
			select {
			case <-p.stop:
				return
			default:
			}
			p.s.produce()
		}
	}
}

// produce creates and submits one generated task.
func (s *Scene) produce() {
	app := s.app
	n := app.seq.Add(1)
	t := newTask("auto-"+strconv.FormatUint(n, 10), genPayload(n, s.cfg.PayloadSize), s.cfg.MaxRetries)
	if err := app.store.add(t); err != nil {
		return
	}
	if err := s.submit(t, stQueued, ""); err != nil {
		app.store.remove(t)
		app.c.refused.Add(1)
		return
	}
	app.c.produced.Add(1)
}

const payloadAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// genPayload returns a JSON-looking order of about size bytes.
func genPayload(n uint64, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"order":%d,"customer":"c-%d","amount":%d.%02d,"note":"`, n, rand.IntN(10000), rand.IntN(500), rand.IntN(100))
	for b.Len() < size-2 {
		b.WriteByte(payloadAlphabet[rand.IntN(len(payloadAlphabet))])
	}
	b.WriteString(`"}`)
	return b.String()
}

// setProducers starts or stops producers until n run. It returns how many run.
func (s *Scene) setProducers(n int) (int, error) {
	s.prodMu.Lock()
	defer s.prodMu.Unlock()
	select {
	case <-s.stopped:
		return int(s.prodUp.Load()), errClosed
	default:
	}
	if n < 0 || n > len(s.producers) {
		return int(s.prodUp.Load()), fmt.Errorf("producers: %d is outside 0..%d", n, len(s.producers))
	}
	up := int(s.prodUp.Load())
	for ; up < n; up++ {
		p := s.producers[up]
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.run()
	}
	for ; up > n; up-- {
		p := s.producers[up-1]
		close(p.stop)
		<-p.done
	}
	s.prodUp.Store(int64(up))
	return up, nil
}

// addProducers changes the number of producers by delta, within limits.
func (s *Scene) addProducers(delta int) (int, error) {
	s.prodMu.Lock()
	n := int(s.prodUp.Load()) + delta
	s.prodMu.Unlock()
	if n < 0 {
		return int(s.prodUp.Load()), errors.New("no producer is running")
	}
	if n > len(s.producers) {
		return int(s.prodUp.Load()), fmt.Errorf("producers_max (%d) reached", len(s.producers))
	}
	return s.setProducers(n)
}

// idle reports whether nothing is in the queue, in a worker or waiting for a
// retry.
func (s *Scene) idle() bool {
	return s.q.Size() == 0 && s.busy.Load() == 0 && s.retries.len() == 0
}

// waitIdle waits until the queue is idle or ctx ends.
func (s *Scene) waitIdle(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for n := 0; ; {
		if s.idle() {
			if n++; n >= 3 { // idle on three checks in a row
				return nil
			}
		} else {
			n = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// waitDrained waits until the queue is empty and no worker is busy.
func (s *Scene) waitDrained(ctx context.Context) error {
	for n := 0; n < 3; {
		if s.q.Size() == 0 && s.busy.Load() == 0 {
			n++
		} else {
			n = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// stop shuts the scene down. Graceful: stop producers and the Restorer, let
// the workers finish what is queued (bounded by ctx), then close the queue
// and flush the dump. Force: stop producers and the Restorer, close the queue
// at once (koykov hands what it held to the dump) and flush the dump.
func (s *Scene) stop(ctx context.Context, force bool) error {
	s.stopOnce.Do(func() {
		s.stopErr = s.doStop(ctx, force)
	})
	return s.stopErr
}

func (s *Scene) doStop(ctx context.Context, force bool) error {
	var errs []error
	_, _ = s.setProducers(0)
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
	if !force {
		if err := s.waitIdle(ctx); err != nil {
			errs = append(errs, fmt.Errorf("workers did not finish: %w", err))
		}
	}
	s.gate.Lock()
	s.closed = true
	if force {
		_ = s.q.ForceClose() // what the queue holds goes to the dump
	} else {
		_ = s.q.Close()
	}
	s.gate.Unlock()
	// Workers finish what they hold (and what a graceful stop that ran out
	// of time left in the queue); a failure goes to the dump, a retry
	// waits in the scheduler.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := s.waitDrained(wctx); err != nil {
		errs = append(errs, fmt.Errorf("workers: %w", err))
	}
	cancel()
	// Retries still waiting go to the dump; a retry scheduled from now on
	// goes there at once.
	for _, t := range s.retries.stop() {
		s.deadLetter(t, reasonShutdown)
	}
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

// retryScheduler holds tasks waiting for their backoff: a min-heap and one
// timer, as in seed 003's RetryManager.
type retryScheduler struct {
	due func(*task)

	mu      sync.Mutex
	h       retryHeap
	seq     uint64
	stopped bool
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	count   atomic.Int64
}

type retryEntry struct {
	at  time.Time
	seq uint64
	t   *task
}

type retryHeap []retryEntry

func (h retryHeap) Len() int { return len(h) }
func (h retryHeap) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || h[i].at.Equal(h[j].at) && h[i].seq < h[j].seq
}
func (h retryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)   { *h = append(*h, x.(retryEntry)) }
func (h *retryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newRetryScheduler(due func(*task)) *retryScheduler {
	r := &retryScheduler{due: due, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// schedule queues t for d from now. It returns false once stopped.
func (r *retryScheduler) schedule(t *task, d time.Duration) bool {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return false
	}
	r.seq++
	heap.Push(&r.h, retryEntry{at: time.Now().Add(d), seq: r.seq, t: t})
	r.count.Add(1)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

func (r *retryScheduler) len() int { return int(r.count.Load()) }

func (r *retryScheduler) loop() {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		var next time.Duration = time.Hour
		var ready []*task
		now := time.Now()
		for r.h.Len() > 0 {
			if e := r.h[0]; e.at.After(now) {
				next = e.at.Sub(now)
				break
			}
			ready = append(ready, heap.Pop(&r.h).(retryEntry).t)
		}
		r.mu.Unlock()
		for _, t := range ready {
			r.due(t)
			r.count.Add(-1)
		}
		if len(ready) > 0 {
			continue
		}
		timer.Reset(next)
		select {
		case <-r.quit:
			return
		case <-r.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// stop ends the loop and returns the tasks still waiting.
func (r *retryScheduler) stop() []*task {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	close(r.quit)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*task, 0, r.h.Len())
	for _, e := range r.h {
		out = append(out, e.t)
	}
	r.h = nil
	r.count.Store(0)
	return out
}

// queueMetrics is the koykov queue's MetricsWriter: it counts what koykov
// saw (puts, pulls, leaks, deadline drops) and what it lost (an item that
// found neither room nor a DLQ: never, with the dump as DLQ).
type queueMetrics struct {
	puts, pulls, leaks atomic.Uint64
	deadline, lost     atomic.Uint64
}

func (m *queueMetrics) WorkerSetup(active, sleep, stop uint)       {}
func (m *queueMetrics) WorkerInit(uint32)                          {}
func (m *queueMetrics) WorkerSleep(uint32)                         {}
func (m *queueMetrics) WorkerWakeup(uint32)                        {}
func (m *queueMetrics) WorkerWait(uint32, time.Duration)           {}
func (m *queueMetrics) WorkerStop(_ uint32, _ bool, status string) {}
func (m *queueMetrics) QueuePut()                                  { m.puts.Add(1) }
func (m *queueMetrics) QueuePull()                                 { m.pulls.Add(1) }
func (m *queueMetrics) QueueRetry()                                {}
func (m *queueMetrics) QueueLeak(string)                           { m.leaks.Add(1) }
func (m *queueMetrics) QueueDeadline()                             { m.deadline.Add(1) }
func (m *queueMetrics) QueueLost()                                 { m.lost.Add(1) }
func (m *queueMetrics) SubqPut(string)                             {}
func (m *queueMetrics) SubqPull(string)                            {}
func (m *queueMetrics) SubqLeak(string)                            {}
