package jobs_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
)

// Regression tests from the review of the due listing, the runners' ranks
// and their heartbeats; each failed before its fix.

// Due jobs no runner here can start (for a destination nobody serves, or
// run by other runners) sort before a job due later: once there are as many
// of them as a listing holds (maxCandidates, 256), the job due later must
// still start.
func TestJobBehindAFullListingOfHeldJobsStarts(t *testing.T) {
	st := memsink.New()
	dump(t, st, 10, 10)
	ctx := t.Context()
	js, rn := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	early := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 256 {
		if _, err := js.Create(ctx, jobs.Spec{ID: fmt.Sprintf("u%04d", i), At: early, Destination: "nobody"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Create(ctx, jobs.Spec{ID: "mine", At: early.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := rn.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A RunDue that starts a job has written it running before it returns.
	if j, err := js.Get(ctx, "mine"); err != nil || j.State == jobs.Pending {
		t.Fatalf("after 3 polls the job due behind 256 unserved ones is %s (%v); want started", j.State, err)
	}
}

// A job whose end write fails after its pass delivered everything is taken
// over by another runner, which finds nothing left: the job's record must
// still say how many records it delivered.
func TestEndWriteFailureKeepsTheCounts(t *testing.T) {
	for _, n := range []int{100, 5} { // several blocks; one block
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			j, byA := endWriteFailsThenTakenOver(t, n, true)
			if j.State != jobs.Completed || byA != n || j.Delivered != uint64(n) {
				t.Fatalf("job %s, %d delivered by A; the job's record says %d delivered, want %d", j.State, byA, j.Delivered, n)
			}
		})
	}
}

// Runners that died without Close leave their heartbeats in "jobsrunners";
// every runner reads every heartbeat at each of its own (hearPeers). Those
// of runners gone for a day must not be read at every heartbeat for ever.
func TestDeadRunnersHeartbeatsNotReadForEver(t *testing.T) {
	st := memsink.New()
	ctx := t.Context()
	tb, err := st.Table("jobsrunners")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now().Add(-24 * time.Hour).UTC()
	for i := range 100 {
		data := fmt.Sprintf(`{"owner":"dead-%d","destinations":[""],"seen":%q,"every":10000000000}`, i, day.Format(time.RFC3339Nano))
		if _, err := tb.WriteRecord(ctx, fmt.Sprintf("r-dead-%d", i), []byte(data), ""); err != nil {
			t.Fatal(err)
		}
	}
	h := &hooked{Store: st}
	var reads atomic.Int32
	h.set(func(h *hooked) {
		h.beforeRead = func(table, _ string) error {
			if table == "jobsrunners" {
				reads.Add(1)
			}
			return nil
		}
	})
	_, rn := runnerOn(t, h, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	for range 3 {
		reads.Store(0)
		if err := rn.Hear(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n > 10 {
		t.Fatalf("a heartbeat read %d heartbeat records, 100 of runners gone for a day", n)
	}
}

// One heartbeat record that cannot be read (damaged, or written by another
// version) must not freeze a runner's view of its peers for good.
func TestDamagedHeartbeatFreezesNoPeers(t *testing.T) {
	st := memsink.New()
	ctx := t.Context()
	tb, err := st.Table("jobsrunners")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.WriteRecord(ctx, "r-zz-damaged", []byte(`{"owner":`), ""); err != nil {
		t.Fatal(err)
	}
	js, a := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	if err := js.Beat(ctx, "B", []string{""}); err != nil {
		t.Fatal(err)
	}
	if err := a.Hear(ctx); err != nil {
		t.Fatal(err)
	}
	second := 0
	for i := range 100 {
		second += a.Rank(fmt.Sprintf("job-%d", i))
	}
	if second == 0 {
		t.Fatal("A ranks first for all 100 jobs: it did not hear of B, alive, beside a damaged heartbeat")
	}
}

// A poll returns when the runner lists again at the latest, a PollInterval
// after its listing: a job due past the listing's reach is found then, not a
// PollInterval after the last poll served from the listing.
func TestPollWakesForTheNextListing(t *testing.T) {
	st := memsink.New()
	dump(t, st, 10, 10)
	ctx := t.Context()
	js, rn := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	if _, err := js.Create(ctx, jobs.Spec{ID: "later", At: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	next, err := rn.RunDue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next.IsZero() || next.After(time.Now().Add(rn.PollInterval())) || next.Before(before) {
		t.Fatalf("RunDue with nothing due within its reach returned %v; want the next listing, within a PollInterval", next)
	}
}
