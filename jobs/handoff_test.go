package jobs_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// segmentNames returns the ready segments of st.
func segmentNames(t *testing.T, st *memsink.Store) []string {
	t.Helper()
	var names []string
	for name, err := range sink.Names(t.Context(), st, sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// Runners that heard of each other rank themselves for every job, one first:
// a runner takes the due jobs it ranks first for before the others', so
// that runners share a backlog rather than look at the same jobs.
func TestRunnersRankedForEachJob(t *testing.T) {
	st := memsink.New()
	dump(t, st, 40, 5)
	names := segmentNames(t, st) // 8
	ctx := t.Context()
	js, a := runnerOn(t, st, st, &dest{}, 1, jobs.RunnerOptions{Owner: "A"})
	// B's one Restorer delivers nothing until RunDue returned: on a
	// loaded machine, a job ending within the poll frees it for another.
	polled := make(chan struct{})
	_, b := runnerOn(t, st, st, &dest{block: func(int) { <-polled }}, 1, jobs.RunnerOptions{Owner: "B"})
	for _, rn := range []*jobs.Runner{a, b, a} {
		if err := rn.Hear(ctx); err != nil {
			t.Fatal(err)
		}
	}
	firstA := 0
	for i := range 100 {
		id := fmt.Sprintf("job-%d", i)
		ra, rb := a.Rank(id), b.Rank(id)
		if ra+rb != 1 {
			t.Fatalf("job %s: ranks %d and %d; want one runner first", id, ra, rb)
		}
		firstA += 1 - ra
	}
	if firstA < 20 || firstA > 80 {
		t.Fatalf("A ranks first for %d of 100 jobs; want about half", firstA)
	}
	// Jobs due an hour ago (every runner's turn came), the oldest one A
	// ranks first for: B, with one Restorer, takes the oldest of those it
	// ranks first for (in due order alone, it would take A's).
	due := time.Now().Add(-time.Hour).Truncate(time.Second)
	var ids []string
	var mine string
	for salt := 0; mine == ""; salt++ {
		ids, mine = ids[:0], ""
		for i := range names {
			ids = append(ids, fmt.Sprintf("j%d-%d", i, salt))
		}
		if a.Rank(ids[0]) != 0 {
			continue
		}
		for _, id := range ids {
			if b.Rank(id) == 0 {
				mine = id
				break
			}
		}
	}
	for i, name := range names {
		if _, err := js.Create(ctx, jobs.Spec{ID: ids[i], At: due.Add(time.Duration(i) * time.Second), Segments: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.RunDue(ctx)
	close(polled)
	if err != nil {
		t.Fatal(err)
	}
	// The one job B started, once it completed.
	var j jobs.Job
	for j.ID == "" {
		for got, err := range js.List(ctx, jobs.Completed) {
			if err != nil {
				t.Fatal(err)
			}
			j = got
		}
		time.Sleep(5 * time.Millisecond)
	}
	if j.ID != mine || j.Runner != b.Owner() {
		t.Fatalf("B ran %s (runner %q) first; want %s, the oldest job it ranks first for", j.ID, j.Runner, mine)
	}
	for _, id := range ids {
		if got, _ := js.Get(ctx, id); id != mine && got.State != jobs.Pending {
			t.Fatalf("job %s is %s: B took more than its first", id, got.State)
		}
	}
}

// A runner heard of lately but running nothing (dead, say) does not keep the
// jobs it ranks first for: the other runners take them a hand-off later.
func TestRunnerTakesTheJobsOfASilentPeer(t *testing.T) {
	st := memsink.New()
	dump(t, st, 20, 5)
	names := segmentNames(t, st) // 4
	ctx := t.Context()
	d := &dest{}
	js, a := runnerOn(t, st, st, d, 2, jobs.RunnerOptions{Owner: "A"})
	if err := js.Beat(ctx, "ghost", []string{""}); err != nil {
		t.Fatal(err)
	}
	if err := a.Hear(ctx); err != nil {
		t.Fatal(err)
	}
	ghosts := 0
	for i, name := range names {
		id := fmt.Sprintf("g%d", i)
		ghosts += a.Rank(id)
		if _, err := js.Create(ctx, jobs.Spec{ID: id, Segments: []string{name}}); err != nil {
			t.Fatal(err)
		}
	}
	if ghosts == 0 {
		t.Fatal("the silent runner ranks first for none of the jobs: the test shows nothing")
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range names {
		if j := waitJob(t, js, fmt.Sprintf("g%d", i)); j.State != jobs.Completed || j.Runner != "A" {
			t.Fatalf("job %+v; want completed by A", j)
		}
	}
	if d.count() != 20 {
		t.Fatalf("%d records delivered, want 20", d.count())
	}
}
