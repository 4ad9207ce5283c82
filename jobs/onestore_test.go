package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
)

// dumpBatches writes segments of perSeg records, record i of batch i/batch
// (header "batch"), n records in all.
func dumpBatches(t *testing.T, st *memsink.Store, n, batch, perSeg int) {
	t.Helper()
	for s := 0; s*perSeg < n; s++ {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.Writer(), Capacity: dlqdump.Megabyte, BlockSize: dlqdump.Kilobyte})
		if err != nil {
			t.Fatal(err)
		}
		for i := s * perSeg; i < min(n, (s+1)*perSeg); i++ {
			h := dlqdump.Headers{dlqdump.HeaderReason: "failed", "batch": fmt.Sprint(i / batch)}
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("item-%05d", i), Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// logSignal is a slog handler that closes a channel at the first line
// whose message holds one of its words.
type logSignal struct {
	words []string
	once  *sync.Once
	seen  chan struct{}
}

func newLogSignal(words ...string) logSignal {
	return logSignal{words: words, once: &sync.Once{}, seen: make(chan struct{})}
}

func (h logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h logSignal) Handle(_ context.Context, r slog.Record) error {
	for _, w := range h.words {
		if strings.Contains(r.Message, w) {
			h.once.Do(func() { close(h.seen) })
		}
	}
	return nil
}
func (h logSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logSignal) WithGroup(string) slog.Handler      { return h }

// Jobs over one store with disjoint selections do not wait on each other by
// ending their pass: job b, whose records share segments with job a's,
// meets a segment a holds while a delivers from it; its pass goes on and
// takes that segment once a lets it go, so b completes in one pass (one
// attempt), each job delivering its records once, and b's pass reads the
// records its selection needs only (the segments of batch 2 it never
// opens).
//
// Before: b's pass ended when it met a's claim and the job was tried again
// after a poll ("job waits for segments other restorers hold"): 2
// attempts, and every segment it selects from read again.
// sharedSegmentJobs starts a runner of two Restorers over a store of 3
// batches of 40 records in segments of 30 (segment 1 holds batches 0 and
// 1, segment 2 batches 1 and 2), with WaitHeld wait, and two jobs: a,
// delivering into da the records of batch 0 in segment 1 (30 to 39), which
// holds segment 1 at its 5th delivery until release is closed, and b,
// created then, delivering batch 1 into db. met is closed once b's pass
// met a's claim on segment 1.
func sharedSegmentJobs(t *testing.T, wait time.Duration) (js *jobs.Store, da, db *ctlDest, met <-chan struct{}, release chan struct{}) {
	t.Helper()
	return sharedSegmentJobsAt(t, wait, 0)
}

// sharedSegmentJobsAt is sharedSegmentJobs with both jobs at rate (0: no
// Rate of their own).
func sharedSegmentJobsAt(t *testing.T, wait time.Duration, rate float64) (js *jobs.Store, da, db *ctlDest, met <-chan struct{}, release chan struct{}) {
	t.Helper()
	st := memsink.New()
	dumpBatches(t, st, 120, 40, 30)
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	da, db = &ctlDest{}, &ctlDest{}
	reached, release := da.hold(5)
	sig := newLogSignal("job waits for segments other restorers hold", "held by another restorer")
	log := slog.New(sig)
	var rs []*dlqdump.Restorer
	for range 2 {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: da,
			Destinations: map[string]queue.Enqueuer{"b": db}, Lease: 300 * time.Millisecond, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		rs = append(rs, r)
	}
	rn, err := jobs.NewRunner(js, rs, &jobs.RunnerOptions{Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond, Logger: log, WaitHeld: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	// Job a's selection is in segment 1 alone; it holds that segment
	// while its 5th delivery waits.
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "a", Select: "batch = 0 and payload ~ item-0003", Rate: rate}); err != nil {
		t.Fatal(err)
	}
	<-reached
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "b", Where: map[string]string{"batch": "1"}, Destination: "b", Rate: rate}); err != nil {
		t.Fatal(err)
	}
	return js, da, db, sig.seen, release
}

func TestJobsOverOneStoreShareItsSegments(t *testing.T) {
	js, da, db, met, release := sharedSegmentJobs(t, time.Minute)
	<-met // b met a's claim on segment 1
	close(release)
	a, b := waitJob(t, js, "a"), waitJob(t, js, "b")
	na, twiceA := da.delivered()
	nb, twiceB := db.delivered()
	if a.State != jobs.Completed || b.State != jobs.Completed || na != 10 || nb != 40 || twiceA+twiceB != 0 {
		t.Fatalf("job a %s with %d delivered (%d twice), job b %s with %d (%d twice); want both completed, 10 and 40 delivered once",
			a.State, na, twiceA, b.State, nb, twiceB)
	}
	if b.Attempts != 1 || a.Attempts != 1 {
		t.Fatalf("job a took %d passes, job b %d: want one each (b's pass waits for the segment a holds)", a.Attempts, b.Attempts)
	}
	// b read segment 1's remainder (batch 1's records a left) and segment
	// 2 (batch 1's 60 to 79, and batch 2's 80 to 89): 10 records read and
	// left at most.
	if b.Skipped > 10 {
		t.Fatalf("job b read and left %d records: want at most 10 (segment 2's batch 2)", b.Skipped)
	}
}

// Paced jobs carve (dlqdump.RunOptions.Carve): job a holds segment 1 only
// while it copies its records out of it, so job b, whose records share the
// segment, delivers all of them and completes while a's delivery is still
// held at its 5th record. Before, b waited for a to let segment 1 go, which
// it did only once its delivery went on.
func TestPacedJobsDeliverFromOneSegmentAtOnce(t *testing.T) {
	js, da, db, _, release := sharedSegmentJobsAt(t, time.Hour, 1000)
	b := waitJob(t, js, "b")
	nb, twiceB := db.delivered()
	if b.State != jobs.Completed || nb != 40 || twiceB != 0 || b.Attempts != 1 {
		t.Fatalf("job b %s after %d passes with %d delivered (%d twice), while a's delivery is held; want completed in one pass, 40 once", b.State, b.Attempts, nb, twiceB)
	}
	if na, _ := da.delivered(); na != 4 {
		t.Fatalf("job a delivered %d records meanwhile, want the 4 before its held 5th", na)
	}
	close(release)
	a := waitJob(t, js, "a")
	na, twiceA := da.delivered()
	if a.State != jobs.Completed || na != 10 || twiceA != 0 {
		t.Fatalf("job a %s with %d delivered (%d twice); want completed, 10 once", a.State, na, twiceA)
	}
}

// A job waiting for a segment another job holds is paused within its wait
// (a pause ends the wait at once), delivering nothing meanwhile, and
// resumed it goes on from where it was.
func TestPauseEndsTheWaitForAHeldSegment(t *testing.T) {
	js, da, db, met, release := sharedSegmentJobs(t, time.Hour)
	<-met
	// b delivered segment 2's batch 1 (60 to 79) and waits for segment 1.
	waitFor(t, func() bool { n, _ := db.delivered(); return n == 20 })
	if _, err := js.Pause(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return j0(t, js, "b").State == jobs.Paused }) // a holds segment 1 all along
	if n, _ := db.delivered(); n != 20 {
		t.Fatalf("job b delivered %d records while paused, want 20", n)
	}
	close(release)
	if a := waitJob(t, js, "a"); a.State != jobs.Completed {
		t.Fatalf("job a %s", a.State)
	}
	if _, err := js.Resume(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	b := waitJob(t, js, "b")
	na, _ := da.delivered()
	nb, twice := db.delivered()
	if b.State != jobs.Completed || na != 10 || nb != 40 || twice != 0 {
		t.Fatalf("job b %s, %d delivered (%d twice); job a delivered %d", b.State, nb, twice, na)
	}
}

// A job's pass waits for a held segment for RunnerOptions.WaitHeld at most:
// then it ends, and the job is tried again after a poll, keeping when it
// was due (Job.At); the retry's time is Job.Next.
func TestWaitForAHeldSegmentIsBounded(t *testing.T) {
	js, _, db, met, release := sharedSegmentJobs(t, 10*time.Millisecond)
	<-met
	created := j0(t, js, "b")
	var j jobs.Job
	waitFor(t, func() bool { j = j0(t, js, "b"); return j.State == jobs.Pending && j.Attempts >= 1 })
	if !j.At.Equal(created.At) || j.Next.IsZero() {
		t.Fatalf("job b waiting for a retry: due %s, next %s; created due %s: want the due time kept and the retry in Next", j.At, j.Next, created.At)
	}
	close(release)
	b := waitJob(t, js, "b")
	nb, twice := db.delivered()
	if b.State != jobs.Completed || b.Attempts < 2 || nb != 40 || twice != 0 || !b.At.Equal(created.At) {
		t.Fatalf("job b %s after %d passes, %d delivered (%d twice), due %s (created due %s)", b.State, b.Attempts, nb, twice, b.At, created.At)
	}
}

// Jobs whose selections overlap, run at once over segments they share,
// deliver each record once: one job at a time holds a segment, and the
// next reads only what the one before left in it. Here 4 jobs, each
// selecting two neighbouring batches of 5 (batches 0-1, 1-2, 2-3, 3-4),
// over segments of 15 records, on 4 Restorers; every job completes in at
// most two passes (a pass that waited for a segment another job then
// finished runs one more: that job may have moved records into segments
// the pass did not list, Report.Moved).
func TestOverlappingJobsDeliverEachRecordOnce(t *testing.T) {
	st := memsink.New()
	dumpBatches(t, st, 5*40, 40, 15)
	d := &dest{}
	js, rn := newRunner(t, st, d, 4)
	for k := range 4 {
		if _, err := js.Create(t.Context(), jobs.Spec{ID: fmt.Sprint("j", k), Select: fmt.Sprintf("batch in (%d, %d)", k, k+1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	var delivered uint64
	for k := range 4 {
		j := waitJob(t, js, fmt.Sprint("j", k))
		if j.State != jobs.Completed || j.Attempts > 2 {
			t.Fatalf("job %s: %s after %d passes; want completed in at most two", j.ID, j.State, j.Attempts)
		}
		delivered += j.Delivered
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n != 200 || len(d.got) != 200 || delivered != 200 {
		t.Fatalf("%d deliveries of %d records (the jobs say %d); want the 200 of batches 0 to 4 once each", d.n, len(d.got), delivered)
	}
}
