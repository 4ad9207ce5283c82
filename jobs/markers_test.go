package jobs_test

import (
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
)

// A job due beyond the hour leaves its marker out of what a poll lists,
// until it comes within the hour; pausing it removes the marker wherever it
// is.
func TestJobsDueLaterAreNotPolled(t *testing.T) {
	st := memsink.New()
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := time.Now()
	for id, at := range map[string]time.Time{"soon": now.Add(time.Minute), "tomorrow": now.Add(24 * time.Hour), "later": now.Add(2 * time.Hour)} {
		if _, err := js.Create(ctx, jobs.Spec{ID: id, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	due, later, err := js.Markers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || len(later) != 2 {
		t.Fatalf("markers due %v, later %v: want the job due soon alone among those polled", due, later)
	}
	if n, err := js.Promote(ctx, now.Add(3*time.Hour)); err != nil || n != 1 {
		t.Fatalf("promote to +3h: %d, %v; want the job due in 2h moved", n, err)
	}
	if _, err := js.Pause(ctx, "tomorrow"); err != nil {
		t.Fatal(err)
	}
	if due, later, err = js.Markers(ctx); err != nil || len(due) != 2 || len(later) != 0 {
		t.Fatalf("markers due %v, later %v, %v: want soon and later due, tomorrow's removed by the pause", due, later, err)
	}
}

// A runner moves the markers that came within the hour itself: a job
// created by a clock two hours behind (its marker among the later ones)
// runs at its second.
func TestRunnerPromotesJobsComingDue(t *testing.T) {
	st := memsink.New()
	dump(t, st, 10, 10)
	d := &dest{}
	js, rn := newRunner(t, st, d, 1)
	js.SetClock(func() time.Time { return time.Now().Add(-2 * time.Hour) })
	at := time.Now().Add(time.Second).Truncate(time.Second)
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "late-clock", At: at}); err != nil {
		t.Fatal(err)
	}
	if _, later, err := js.Markers(t.Context()); err != nil || len(later) != 1 {
		t.Fatalf("later markers %v, %v: want the job's", later, err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, js, "late-clock"); j.State != jobs.Completed || j.Delivered != 10 || j.Started.Before(at) {
		t.Fatalf("job %+v", j)
	}
	if due, later, err := js.Markers(t.Context()); err != nil || len(due)+len(later) != 0 {
		t.Fatalf("markers left: due %v, later %v, %v", due, later, err)
	}
}

// A job paused before its second and resumed is due at its second still,
// not at once; an At between two seconds is rounded up, never down.
func TestJobResumedBeforeItsSecond(t *testing.T) {
	js, err := jobs.Open(memsink.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	at := time.Now().Add(26 * time.Hour).Truncate(time.Second).Add(241 * time.Millisecond)
	j, err := js.Create(ctx, jobs.Spec{ID: "tomorrow", At: at})
	if err != nil {
		t.Fatal(err)
	}
	want := at.Truncate(time.Second).Add(time.Second).UTC()
	if !j.At.Equal(want) {
		t.Fatalf("due %s, want %s (rounded up)", j.At, want)
	}
	if _, err := js.Pause(ctx, "tomorrow"); err != nil {
		t.Fatal(err)
	}
	if j, err = js.Resume(ctx, "tomorrow"); err != nil || j.State != jobs.Pending || !j.At.Equal(want) {
		t.Fatalf("resumed: %+v, %v; want pending, due %s", j, err, want)
	}
	if _, later, err := js.Markers(ctx); err != nil || len(later) != 1 {
		t.Fatalf("later markers %v, %v: want the resumed job's", later, err)
	}
}
