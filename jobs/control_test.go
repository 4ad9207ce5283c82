package jobs_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
)

// Control at the grain of a record: a pause its runner has seen takes effect
// at the next record, not at the end of the block (a block of 1,000 records
// at 2 items/s is eight minutes), and the job's record says what was
// delivered.
func TestPauseTakesEffectAtTheNextRecord(t *testing.T) {
	st := memsink.New()
	dumpOneBlock(t, st, 1000)
	d := &ctlDest{}
	reached, release := d.hold(10)
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A", Lease: heldLease})
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "p", Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	<-reached // the 10th record is being delivered
	if _, err := js.Pause(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, st, "p", readRaw(t, st, "p").Rev, "pause")
	close(release)
	j := waitState(t, js, "p", jobs.Paused)
	if n, _ := d.delivered(); n != 10 || j.Delivered != 10 || j.Request != "" {
		t.Fatalf("paused having delivered %d, its record says %d (request %q); its runner knew of the pause while the 10th was delivered: want 10, 10, none", n, j.Delivered, j.Request)
	}
	if _, err := js.Resume(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, js, "p")
	if n, twice := d.delivered(); j.State != jobs.Completed || n != 1000 || twice != 0 || j.Delivered != 1000 {
		t.Fatalf("after the resume: %s, %d delivered (%d twice), its record says %d; want completed, 1000 once", j.State, n, twice, j.Delivered)
	}
}

// A job paced at 2 items/s is paused, or cancelled, between two records:
// the wait for its pace is cut short.
func TestPauseAtTwoItemsASecond(t *testing.T) {
	for _, verb := range []string{"pause", "cancel"} {
		t.Run(verb, func(t *testing.T) { controlAtTwoItemsASecond(t, verb) })
	}
}

func controlAtTwoItemsASecond(t *testing.T, verb string) {
	st := memsink.New()
	dumpOneBlock(t, st, 1000)
	d := &ctlDest{}
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A", Lease: heldLease})
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "slow", Rate: 2, Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	waitFor(t, func() bool { n, _ := d.delivered(); return n >= 2 })
	ask, want := js.Pause, jobs.Paused
	if verb == "cancel" {
		ask, want = js.Cancel, jobs.Cancelled
	}
	if _, err := ask(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, st, "slow", readRaw(t, st, "slow").Rev, verb)
	seen, _ := d.delivered()
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(ctx, "slow")
		n, _ := d.delivered()
		return err == nil && (j.State == want || n > seen+1)
	})
	if n, _ := d.delivered(); j.State != want || n > seen+1 || j.Delivered != uint64(n) {
		t.Fatalf("job %s, %d delivered, its record says %d; %d were when its runner knew of the %s: want %s at the next record", j.State, n, j.Delivered, seen, verb, want)
	}
}

// The counts are written while a block is delivered, not at its end: a job
// at 100 items/s over one block of 400 records shows what it delivered
// before the block ends.
func TestProgressWrittenWithinABlock(t *testing.T) {
	st := memsink.New()
	dumpOneBlock(t, st, 400)
	d := &ctlDest{}
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A", Lease: heldLease})
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "shown", Rate: 100, Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(ctx, "shown")
		return err == nil && (j.State.Final() || j.Delivered > 0)
	})
	if j.Delivered == 0 || j.Delivered >= 400 || j.Progressed.IsZero() {
		t.Fatalf("job %s: delivered %d of the block of 400 when first shown (progressed %s); want a part of it, written while the block was delivered", j.State, j.Delivered, j.Progressed)
	}
}

// A pause or cancel is never lost, whichever way the pass ends: here its
// runner knew of the request (its record was written since, keeping it),
// and the pass then ended by a failure, by the runner closing, or by
// segments held by another restorer. The job ends paused or cancelled, its
// record holding no request, and nothing is delivered after it.
func TestRequestKeptWhicheverWayThePassEnds(t *testing.T) {
	for _, end := range []string{"failure", "closing", "held elsewhere"} {
		for _, verb := range []string{"pause", "cancel"} {
			t.Run(end+"/"+verb, func(t *testing.T) {
				requestKept(t, end, verb)
			})
		}
	}
}

func requestKept(t *testing.T, end, verb string) {
	st := memsink.New()
	dumpOneBlock(t, st, 300)
	dumpOneBlock(t, st, 300)
	names := segmentNames(t, st)
	ctx := t.Context()
	h := &hooked{Store: st}
	var seen seenIn
	h.set(func(h *hooked) { h.afterWrite = seen.wrote })
	d := &ctlDest{}
	o := jobs.RunnerOptions{Owner: "A"}
	if end == "held elsewhere" {
		o.WaitHeld = -1 // the pass ends at the held segment, not waiting for it
	}
	_, rn := runnerOn(t, h, st, d, 1, o)
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() {
		var err error
		if verb == "pause" {
			_, err = js.Pause(ctx, "k")
		} else {
			_, err = js.Cancel(ctx, "k")
		}
		if err != nil {
			t.Error(err)
		}
	}
	switch end {
	case "held elsewhere":
		// The second segment is held by another restorer: the pass
		// delivers the first and ends. The request comes then, and a
		// renewal of the job's claim knows of it before the end.
		other, err := claims.NewClaimer(st, "other", time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Claim(ctx, names[1]); err != nil {
			t.Fatal(err)
		}
		// The request lands as the pass ends: before its new due marker
		// or, due again in the same second, its end write.
		var once sync.Once
		h.set(func(h *hooked) {
			h.beforeWrite = func(table, key string, data []byte) error {
				if table == "jobsdue" || table == "jobs" && !strings.Contains(string(data), `"token"`) && strings.Contains(string(data), `"state":"pending"`) {
					once.Do(func() {
						ch := seen.arm(verb)
						ask()
						within(ch, 2*time.Second)
					})
				}
				return nil
			}
		})
		if _, err := js.Create(ctx, jobs.Spec{ID: "k", Segments: names}); err != nil {
			t.Fatal(err)
		}
		_ = rn.Start()
	default:
		reached, release := d.hold(10)
		if _, err := js.Create(ctx, jobs.Spec{ID: "k", Segments: names}); err != nil {
			t.Fatal(err)
		}
		_ = rn.Start()
		<-reached
		ask()
		waitSeen(t, st, "k", readRaw(t, st, "k").Rev, verb)
		if end == "failure" {
			d.down.Store(true) // the record being delivered fails: the pass fails
			close(release)
		} else {
			var closed atomic.Bool
			go func() { _ = rn.Close(); closed.Store(true) }()
			close(release)
			waitFor(t, closed.Load)
		}
	}
	want := map[string]jobs.State{"pause": jobs.Paused, "cancel": jobs.Cancelled}[verb]
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(ctx, "k")
		return err == nil && readRaw(t, st, "k").Token == "" && (j.State == want || j.State.Final() || j.State == jobs.Pending && j.Request == "" && j.Attempts > 0)
	})
	if j.State != want || j.Request != "" {
		t.Fatalf("%s requested, then the pass ended by %s: the job is %s with request %q; want %s, none", verb, end, j.State, j.Request, want)
	}
	d.down.Store(false)
	// Another runner finds nothing to run.
	_, rnB := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "B"})
	before, _ := d.delivered()
	if _, err := rnB.RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	_ = rnB.Close()
	if n, _ := d.delivered(); n != before {
		t.Fatalf("%d delivered after the job was %s", n-before, j.State)
	}
}

// A resume that withdraws a pause wins, even when it lands as the runner
// records the pause: the job does not stay paused.
func TestResumeWithdrawingAPauseWins(t *testing.T) {
	st := memsink.New()
	dumpOneBlock(t, st, 300)
	dumpOneBlock(t, st, 300)
	ctx := t.Context()
	h := &hooked{Store: st}
	d := &ctlDest{}
	reached, release := d.hold(10)
	js, rn := runnerOn(t, h, st, d, 1, jobs.RunnerOptions{Owner: "A", Lease: heldLease})
	var once sync.Once
	var answer jobs.Job
	var pausedWritten atomic.Bool
	h.set(func(h *hooked) {
		h.beforeWrite = func(table, key string, data []byte) error {
			if table == "jobs" && strings.Contains(string(data), `"state":"paused"`) {
				once.Do(func() {
					var err error
					if answer, err = js.Resume(ctx, "wr"); err != nil {
						t.Error(err)
					}
				})
			}
			return nil
		}
		h.afterWrite = func(table, key string, data []byte, err error) {
			if table == "jobs" && err == nil && strings.Contains(string(data), `"state":"paused"`) {
				pausedWritten.Store(true)
			}
		}
	})
	if _, err := js.Create(ctx, jobs.Spec{ID: "wr", Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	<-reached
	if _, err := js.Pause(ctx, "wr"); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, st, "wr", readRaw(t, st, "wr").Rev, "pause")
	close(release)
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(ctx, "wr")
		return err == nil && (j.State == jobs.Completed || pausedWritten.Load())
	})
	if pausedWritten.Load() || j.State != jobs.Completed {
		t.Fatalf("the job is %s after its pause was withdrawn (Resume answered %s, request %q); want it to go on and complete", j.State, answer.State, answer.Request)
	}
	if n, twice := d.delivered(); n != 600 || twice != 0 {
		t.Fatalf("%d delivered, %d twice; want 600 once", n, twice)
	}
}

// A cancel or pause accepted just before the job completes is acted on or
// said to be refused; the ended record holds no request.
func TestRequestJustBeforeCompletion(t *testing.T) {
	for _, verb := range []string{"cancel", "pause"} {
		t.Run(verb, func(t *testing.T) {
			st := memsink.New()
			dumpOneBlock(t, st, 100)
			ctx := t.Context()
			h := &hooked{Store: st}
			js, rn := runnerOn(t, h, st, &ctlDest{}, 1, jobs.RunnerOptions{Owner: "A"})
			var once sync.Once
			h.set(func(h *hooked) {
				h.beforeWrite = func(table, key string, data []byte) error {
					if table == "jobs" && strings.Contains(string(data), `"state":"completed"`) {
						once.Do(func() {
							var err error
							if verb == "cancel" {
								_, err = js.Cancel(ctx, "late")
							} else {
								_, err = js.Pause(ctx, "late")
							}
							if err != nil {
								t.Error(err)
							}
						})
					}
					return nil
				}
			})
			if _, err := js.Create(ctx, jobs.Spec{ID: "late", Segments: segmentNames(t, st)}); err != nil {
				t.Fatal(err)
			}
			_ = rn.Start()
			var j jobs.Job
			waitFor(t, func() bool {
				var err error
				j, err = js.Get(ctx, "late")
				return err == nil && (j.State.Final() || j.State == jobs.Paused)
			})
			if j.Request != "" {
				t.Fatalf("the job ended %s with request %q: an ended job's record holds none", j.State, j.Request)
			}
		})
	}
}

// busyDest is a destination whose fullness (Rate) reads high at its at-th
// look, and from then on at that look's caller alone, until release: that
// delivery waits for room while the deliveries after it, on the other
// goroutines of the Restorer's Concurrency, go on.
type busyDest struct {
	ctlDest
	mu       sync.Mutex
	looks    int
	at       int
	release  atomic.Bool
	after    atomic.Int32 // records accepted while one waits for room
	waiting  atomic.Bool
	rechecks atomic.Int32 // the waiting delivery's looks
}

func (b *busyDest) Rate() float32 {
	b.mu.Lock()
	b.looks++
	n := b.looks
	b.mu.Unlock()
	if n == b.at || b.waiting.Load() && !b.release.Load() && isWaiter() {
		b.waiting.Store(true)
		markWaiter()
		b.rechecks.Add(1)
		return 1
	}
	return 0
}

func (b *busyDest) Enqueue(x any) error {
	if b.waiting.Load() && !b.release.Load() {
		b.after.Add(1)
	}
	return b.ctlDest.Enqueue(x)
}

// The goroutine waiting for room is told apart by a goroutine-local mark:
// the waiting delivery re-checks Rate every PostponeInterval.
var waiterMu sync.Mutex
var waiterID int64 = -1

func goid() int64 {
	var buf [64]byte
	n := runtimeStack(buf[:])
	s := strings.TrimPrefix(string(buf[:n]), "goroutine ")
	var id int64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + int64(c-'0')
	}
	return id
}

func markWaiter() {
	waiterMu.Lock()
	defer waiterMu.Unlock()
	if waiterID < 0 {
		waiterID = goid()
	}
}

func isWaiter() bool {
	waiterMu.Lock()
	defer waiterMu.Unlock()
	return waiterID == goid()
}

// A graceful stop delivers nothing twice, deliveries in flight included:
// with Concurrency 4, one delivery waits for room at the destination while
// the three after it are accepted; the runner closes. The records accepted
// stay accepted: the next runner delivers each of the others once.
func TestGracefulStopDeliversNothingTwice(t *testing.T) {
	st := memsink.New()
	dumpOneBlock(t, st, 400)
	d := &busyDest{at: 20}
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(owner string) *jobs.Runner {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: d,
			Lease: 300 * time.Millisecond, MaxAttempts: 1, Concurrency: 4, AllowRate: 0.5, PostponeInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Owner: owner, Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rn.Close() })
		return rn
	}
	a := mk("A")
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "g", Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = a.Start()
	// Three deliveries after the waiting one are accepted (or, where the
	// Restorer waits for room before it hands a record out, the waiting
	// one looked again and again: what was handed out before has ended).
	waitFor(t, func() bool { return d.after.Load() >= 3 || d.rechecks.Load() >= 200 })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	d.release.Store(true)
	if j, err := js.Get(ctx, "g"); err != nil || j.State != jobs.Pending {
		t.Fatalf("after its runner closed: %+v, %v; want pending", j, err)
	}
	b := mk("B")
	_ = b.Start()
	j := waitJob(t, js, "g")
	if n, twice := d.delivered(); j.State != jobs.Completed || n != 400 || twice != 0 || j.Delivered != 400 {
		t.Fatalf("job %s: %d delivered, %d of them twice, its record says %d; want 400 once", j.State, n, twice, j.Delivered)
	}
}
