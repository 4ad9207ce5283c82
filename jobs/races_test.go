package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// The races of a job's record and its due markers, each replayed
// deterministically through hooks on the store's tables.

// hooked is a memsink whose tables call hooks around reads and writes.
type hooked struct {
	*memsink.Store
	mu          sync.Mutex
	beforeRead  func(table, key string) error
	beforeWrite func(table, key string, data []byte) error
	afterWrite  func(table, key string, data []byte, err error)
	// answer, when set, is what a write that took effect answers (an S3
	// client whose context was cancelled meanwhile answers its error).
	answer func(ctx context.Context, table, key string, data []byte) error
}

func (h *hooked) set(f func(h *hooked)) { h.mu.Lock(); f(h); h.mu.Unlock() }

func (h *hooked) hooks() (func(string, string) error, func(string, string, []byte) error, func(string, string, []byte, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beforeRead, h.beforeWrite, h.afterWrite
}

func (h *hooked) Table(name string) (sink.Records, error) {
	r, err := h.Store.Table(name)
	if err != nil {
		return nil, err
	}
	return &hookedTable{Records: r, h: h, name: name}, nil
}

type hookedTable struct {
	sink.Records
	h    *hooked
	name string
}

func (t *hookedTable) ReadRecord(ctx context.Context, key string) ([]byte, string, error) {
	if br, _, _ := t.h.hooks(); br != nil {
		if err := br(t.name, key); err != nil {
			return nil, "", err
		}
	}
	return t.Records.ReadRecord(ctx, key)
}

func (t *hookedTable) WriteRecord(ctx context.Context, key string, data []byte, v string) (string, error) {
	_, bw, aw := t.h.hooks()
	if bw != nil {
		if err := bw(t.name, key, data); err != nil {
			return "", err
		}
	}
	nv, err := t.Records.WriteRecord(ctx, key, data, v)
	if aw != nil {
		aw(t.name, key, data, err)
	}
	t.h.mu.Lock()
	answer := t.h.answer
	t.h.mu.Unlock()
	if err == nil && answer != nil {
		if aerr := answer(ctx, t.name, key, data); aerr != nil {
			return "", aerr
		}
	}
	return nv, err
}

// runnerOn makes a runner of n Restorers delivering into d, whose jobs are
// read through rd while the Restorers read st; their leases are opts.Lease,
// 300ms if not set. A test that holds a delivery (ctlDest.hold) and does not
// test a takeover sets a lease a loaded machine keeps renewing (heldLease):
// a claim lost while the delivery is held leaves nothing to write the job's
// record until it is let go.
func runnerOn(t *testing.T, rd sink.Reader, st *memsink.Store, d queue.Enqueuer, n int, opts jobs.RunnerOptions) (*jobs.Store, *jobs.Runner) {
	t.Helper()
	js, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Lease == 0 {
		opts.Lease = 300 * time.Millisecond // takeovers within a test's time
	}
	var rs []*dlqdump.Restorer
	for range n {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: d,
			Lease: opts.Lease, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		rs = append(rs, r)
	}
	opts.PollInterval = 20 * time.Millisecond
	rn, err := jobs.NewRunner(js, rs, &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	return js, rn
}

// A poll between Resume's marker and its record (which still says paused)
// removes the marker as stale; Resume puts it back after its write, and the
// job runs.
func TestResumeRacingAPoll(t *testing.T) {
	st := memsink.New()
	dump(t, st, 100, 100)
	js, rn := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	h := &hooked{Store: st}
	ctl, _ := jobs.Open(h)
	ctx := t.Context()
	if _, err := ctl.Create(ctx, jobs.Spec{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Pause(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	h.set(func(h *hooked) {
		h.afterWrite = func(table, _ string, _ []byte, err error) {
			if table == "jobsdue" && err == nil {
				once.Do(func() { _, _ = rn.RunDue(ctx) }) // a poll lands here
			}
		}
	})
	if _, err := ctl.Resume(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, js, "r1"); j.State != jobs.Completed || j.Delivered != 100 {
		t.Fatalf("resumed job %+v", j)
	}
}

// A cancel or pause that lands between a runner's look at a job and its
// claim wins: the claim, written at the version looked at, fails, and the
// runner runs nothing.
func TestControlBetweenLookAndClaim(t *testing.T) {
	for _, verb := range []string{"cancel", "pause"} {
		t.Run(verb, func(t *testing.T) {
			st := memsink.New()
			dump(t, st, 100, 100)
			d := &dest{}
			h := &hooked{Store: st}
			_, rn := runnerOn(t, h, st, d, 1, jobs.RunnerOptions{Owner: "A"})
			ctl, _ := jobs.Open(st)
			ctx := t.Context()
			if _, err := ctl.Create(ctx, jobs.Spec{ID: "c1"}); err != nil {
				t.Fatal(err)
			}
			var writes atomic.Int32
			h.set(func(h *hooked) {
				h.beforeWrite = func(table, key string, _ []byte) error {
					if table == "jobs" && key == "j-c1" && writes.Add(1) == 1 { // the claim's write
						var err error
						if verb == "cancel" {
							_, err = ctl.Cancel(ctx, "c1")
						} else {
							_, err = ctl.Pause(ctx, "c1")
						}
						if err != nil {
							t.Error(err)
						}
					}
					return nil
				}
			})
			if _, err := rn.RunDue(ctx); err != nil {
				t.Fatal(err)
			}
			if err := rn.Close(); err != nil { // waits for what it started
				t.Fatal(err)
			}
			j, err := ctl.Get(ctx, "c1")
			want := map[string]jobs.State{"cancel": jobs.Cancelled, "pause": jobs.Paused}[verb]
			if err != nil || j.State != want || d.count() != 0 || writes.Load() < 1 {
				t.Fatalf("job %s before its claim: %s (%v), %d delivered, %d writes; want %s and none", verb, j.State, err, d.count(), writes.Load(), want)
			}
		})
	}
}

// The write that ends a job fails: the job is still held in its record, and
// its marker stays, so another runner takes it over after the lease.
func TestEndWriteFailureTakenOver(t *testing.T) {
	if j, _ := endWriteFailsThenTakenOver(t, 100, false); j.State != jobs.Completed {
		t.Fatalf("job %+v", j)
	}
}

// endWriteFailsThenTakenOver runs job e1 over n records (one segment) on
// runner A, fails its end write once, then starts runner B (after closing A
// if closeA), and returns the job once ended and the records A delivered.
func endWriteFailsThenTakenOver(t *testing.T, n int, closeA bool) (jobs.Job, int) {
	t.Helper()
	st := memsink.New()
	dump(t, st, n, n)
	h := &hooked{Store: st}
	dA := &dest{}
	js, rnA := runnerOn(t, h, st, dA, 1, jobs.RunnerOptions{Owner: "A"})
	_, rnB := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "B"})
	var failed atomic.Bool
	failedOnce := make(chan struct{})
	h.set(func(h *hooked) {
		h.beforeWrite = func(table, key string, data []byte) error {
			if key == "j-e1" && strings.Contains(string(data), `"state":"completed"`) && failed.CompareAndSwap(false, true) {
				close(failedOnce)
				return errors.New("injected: 503 SlowDown")
			}
			return nil
		}
	})
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "e1"}); err != nil {
		t.Fatal(err)
	}
	_ = rnA.Start()
	<-failedOnce // A ran the job and its end failed; B is there to take it over
	if closeA {
		_ = rnA.Close()
	}
	_ = rnB.Start()
	return waitJob(t, js, "e1"), dA.count()
}

// Runner A stalls past its lease while ending a job; B takes it over and
// stops, holding it; A goes on: its write is refused, and it leaves B's
// marker, by which C takes the job over and completes it.
func TestStalledEndLeavesTheTakersMarker(t *testing.T) {
	st := memsink.New()
	dump(t, st, 100, 100)
	hA, hB := &hooked{Store: st}, &hooked{Store: st}
	js, rnA := runnerOn(t, hA, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	_, rnB := runnerOn(t, hB, st, &dest{}, 1, jobs.RunnerOptions{Owner: "B"})
	_, rnC := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "C"})
	stalledA, goA, wokeA := make(chan struct{}), make(chan struct{}), make(chan struct{})
	stoppedB, frozenB := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(frozenB) })
	var onceA, onceB, onceWoke sync.Once
	completing := func(key string, data []byte) bool {
		return key == "j-k1" && strings.Contains(string(data), `"state":"completed"`)
	}
	hA.set(func(h *hooked) {
		h.beforeWrite = func(_, key string, data []byte) error {
			if completing(key, data) {
				onceA.Do(func() { close(stalledA); <-goA })
			}
			return nil
		}
		h.afterWrite = func(table, key string, data []byte, err error) {
			if completing(key, data) {
				onceWoke.Do(func() { close(wokeA) })
			}
		}
	})
	hB.set(func(h *hooked) {
		h.beforeWrite = func(_, key string, data []byte) error {
			if completing(key, data) {
				onceB.Do(func() { close(stoppedB); <-frozenB })
			}
			return nil
		}
	})
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "k1"}); err != nil {
		t.Fatal(err)
	}
	_ = rnA.Start()
	<-stalledA
	_ = rnB.Start()
	<-stoppedB
	close(goA)
	<-wokeA
	// A's end is refused; what it does next must not strand B's job.
	_ = rnA.Close()
	_ = rnC.Start()
	if j := waitJob(t, js, "k1"); j.State != jobs.Completed || j.Runner != "C" {
		t.Fatalf("job %+v: want completed by C", j)
	}
}

// A marker of "jobslater" that cannot be read stops no runner: the jobs
// due now run, and it is tried again later.
func TestBadLaterMarkerStopsNothing(t *testing.T) {
	st := memsink.New()
	dump(t, st, 10, 10)
	h := &hooked{Store: st}
	js, rn := runnerOn(t, h, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	bad := time.Now().Add(30 * time.Minute)
	ctl, _ := jobs.Open(st)
	ctl.SetClock(func() time.Time { return time.Now().Add(-2 * time.Hour) }) // its marker among the later ones
	if _, err := ctl.Create(t.Context(), jobs.Spec{ID: "evil", At: bad, Destination: "nobody"}); err != nil {
		t.Fatal(err)
	}
	h.set(func(h *hooked) {
		h.beforeRead = func(table, key string) error {
			if table == "jobslater" {
				return errors.New("injected: access denied")
			}
			return nil
		}
	})
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "victim"}); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, js, "victim"); j.State != jobs.Completed {
		t.Fatalf("job due now: %+v", j)
	}
}

// failing is a destination that is down while down is set.
type failing struct{ down atomic.Bool }

func (d *failing) Enqueue(any) error {
	if d.down.Load() {
		return fmt.Errorf("%w: down", dlqdump.ErrUnavailable)
	}
	time.Sleep(time.Millisecond) // a job long enough to be paused
	return nil
}

// MaxAttempts bounds the failed passes in a row, not the passes: a job
// paused and resumed five times survives a failing pass, and completes.
func TestFailuresNotAttempts(t *testing.T) {
	st := memsink.New()
	dump(t, st, 3000, 3000)
	fd := &failing{}
	js, rn := runnerOn(t, st, st, fd, 1, jobs.RunnerOptions{Owner: "A", RetryBase: time.Millisecond})
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "pr", Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	for range 5 {
		waitState(t, js, "pr", jobs.Running)
		if _, err := js.Pause(ctx, "pr"); err != nil {
			t.Fatal(err)
		}
		waitState(t, js, "pr", jobs.Paused)
		if _, err := js.Resume(ctx, "pr"); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, js, "pr", jobs.Running)
	fd.down.Store(true)
	waitFor(t, func() bool {
		j, err := js.Get(ctx, "pr")
		return err == nil && (j.Failures > 0 || j.State.Final())
	})
	fd.down.Store(false)
	if j := waitJob(t, js, "pr"); j.State != jobs.Completed || j.Attempts <= j.Spec.MaxAttempts {
		t.Fatalf("job %+v: want completed after more passes than MaxAttempts", j)
	}
}

// Close stops the jobs RunDue started (they are made pending again), and a
// RunDue after Close starts nothing.
func TestRunDueJobsStopOnClose(t *testing.T) {
	st := memsink.New()
	dump(t, st, 400, 400)
	release := make(chan struct{})
	d := &dest{block: func(n int) {
		if n == 10 {
			<-release
		}
	}}
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A"})
	ctx := context.Background()
	if _, err := js.Create(ctx, jobs.Spec{ID: "slow"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rn.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return d.count() >= 10 })
	closed := make(chan error, 1)
	if err := rn.Hear(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { closed <- rn.Close() }()
	waitGone(t, js, "A") // Close told the job to stop
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// Pending again (stopped at the record after the one in flight),
	// not completed.
	if j, err := js.Get(ctx, "slow"); err != nil || j.State != jobs.Pending {
		t.Fatalf("after Close: %+v, %v; want pending, not completed", j, err)
	}
	if _, err := rn.RunDue(ctx); !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("RunDue after Close: %v, want ErrClosed", err)
	}
}

// The heartbeat goes on while every Restorer runs a job.
func TestHeartbeatWhileBusy(t *testing.T) {
	st := memsink.New()
	dump(t, st, 100, 100)
	release := make(chan struct{})
	d := &dest{block: func(n int) {
		if n == 1 {
			<-release
		}
	}}
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A", Heartbeat: 10 * time.Millisecond})
	defer close(release)
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "slow"}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	waitFor(t, func() bool { return d.count() >= 1 }) // busy from now on
	seen := func() time.Time {
		for ri, err := range js.Runners(t.Context()) {
			if err == nil && ri.Owner == "A" {
				return ri.Seen
			}
		}
		return time.Time{}
	}
	first := seen()
	waitFor(t, func() bool { return seen().After(first) })
}

// Due jobs for a destination nobody serves are looked at once a while, not
// at every poll.
func TestUnservedJobsNotReadEveryPoll(t *testing.T) {
	st := memsink.New()
	h := &hooked{Store: st}
	var reads atomic.Int32
	h.set(func(h *hooked) {
		h.beforeRead = func(table, _ string) error {
			if table == "jobs" {
				reads.Add(1)
			}
			return nil
		}
	})
	js, rn := runnerOn(t, h, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	for i := range 100 {
		if _, err := js.Create(t.Context(), jobs.Spec{ID: fmt.Sprintf("u%04d", i), Destination: "nobody"}); err != nil {
			t.Fatal(err)
		}
	}
	reads.Store(0)
	for range 3 {
		if _, err := rn.RunDue(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n > 150 {
		t.Fatalf("3 polls read %d job records of 100 due jobs nobody serves", n)
	}
}

// A resume right after a pause the runner has not acted on yet withdraws
// the pause: the job goes on and completes.
func TestPauseWithdrawnByResume(t *testing.T) {
	st := memsink.New()
	dump(t, st, 500, 500)
	release := make(chan struct{})
	d := &dest{block: func(n int) {
		if n == 1 {
			<-release
		}
	}}
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A"})
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "pr"}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	waitFor(t, func() bool { return d.count() >= 1 }) // running, in its first block
	if _, err := js.Pause(ctx, "pr"); err != nil {
		t.Fatal(err)
	}
	if j, err := js.Resume(ctx, "pr"); err != nil || j.Request != "" {
		t.Fatalf("resume: %+v, %v; want the pause withdrawn", j, err)
	}
	close(release)
	if j := waitJob(t, js, "pr"); j.State != jobs.Completed || j.Delivered != 500 {
		t.Fatalf("job %+v", j)
	}
}

// Markers seen before their record is written are forgotten once it is.
func TestOrphansForgotten(t *testing.T) {
	st := memsink.New()
	h := &hooked{Store: st}
	_, rn := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	ctl, _ := jobs.Open(h)
	ctx := t.Context()
	h.set(func(h *hooked) {
		h.afterWrite = func(table, _ string, _ []byte, err error) {
			if table == "jobsdue" && err == nil {
				_, _ = rn.RunDue(ctx) // sees the marker, not yet the record
			}
		}
	})
	for i := range 50 {
		if _, err := ctl.Create(ctx, jobs.Spec{ID: fmt.Sprintf("o%04d", i), Destination: "nobody"}); err != nil {
			t.Fatal(err)
		}
	}
	h.set(func(h *hooked) { h.afterWrite = nil })
	if n := rn.Orphans(); n == 0 {
		t.Fatal("no poll saw a marker before its record: the test tests nothing")
	}
	if _, err := rn.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rn.Orphans(); n != 0 {
		t.Fatalf("%d markers kept as orphans although their records exist", n)
	}
}

// A spec too large for a job's record is refused at Create, naming why.
func TestOversizedSpecRefused(t *testing.T) {
	js, _ := jobs.Open(memsink.New())
	segs := make([]string, 2000)
	for i := range segs {
		segs[i] = fmt.Sprintf("20261127T000000.%09dZ-%016x.dlq", i, i)
	}
	_, err := js.Create(t.Context(), jobs.Spec{ID: "big", Segments: segs})
	if !errors.Is(err, dlqdump.ErrConfig) || !strings.Contains(err.Error(), "Segments") {
		t.Fatalf("create with 2000 segments: %v; want ErrConfig naming Segments", err)
	}
}
