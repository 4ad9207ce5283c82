package jobs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
)

// downJob runs job spec (its Segments set to the store's one segment of 100
// records) into a destination that is down until told otherwise.
func downJob(t *testing.T, spec jobs.Spec) (*jobs.Store, *ctlDest) {
	t.Helper()
	st := memsink.New()
	dumpOneBlock(t, st, 100)
	d := &ctlDest{}
	d.down.Store(true)
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A", RetryBase: time.Millisecond})
	spec.Segments = segmentNames(t, st)
	if _, err := js.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	return js, d
}

// A job survives an outage of its destination longer than a few passes: its
// budget is time without progress, not a count of passes.
func TestJobSurvivesManyFailedPasses(t *testing.T) {
	js, d := downJob(t, jobs.Spec{ID: "o"})
	ctx := t.Context()
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(ctx, "o")
		return err == nil && (j.State.Final() || j.Failures >= 8)
	})
	if j.State.Final() {
		t.Fatalf("the job %s after %d failed passes in a row (%s): want it pending, tried again", j.State, j.Failures, j.Error)
	}
	d.down.Store(false)
	if j = waitJob(t, js, "o"); j.State != jobs.Completed || j.Delivered != 100 {
		t.Fatalf("job %+v", j)
	}
}

// A failed job can be resumed, and runs; creating a job that ended again
// says that it ended, and how.
func TestFailedJobResumedAndEndedJobCreatedAgain(t *testing.T) {
	js, d := downJob(t, jobs.Spec{ID: "f", MaxAttempts: 1})
	ctx := t.Context()
	if j := waitJob(t, js, "f"); j.State != jobs.Failed {
		t.Fatalf("job %+v: want failed after its one attempt", j)
	}
	d.down.Store(false)
	if j, err := js.Resume(ctx, "f"); err != nil || j.State != jobs.Pending {
		t.Fatalf("resume a failed job: %+v, %v; want pending", j, err)
	}
	if j := waitJob(t, js, "f"); j.State != jobs.Completed || j.Delivered != 100 {
		t.Fatalf("resumed failed job %+v", j)
	}
	spec := j0(t, js, "f").Spec
	_, err := js.Create(ctx, spec)
	if !errors.Is(err, jobs.ErrFinished) || !strings.Contains(err.Error(), "completed") {
		t.Fatalf("create the completed job's ID again: %v; want an error saying it completed", err)
	}
}

// A job fails once its passes failed without progress for Spec.FailAfter,
// not before, and its record says since when and how often.
func TestJobFailsAfterItsBudget(t *testing.T) {
	js, _ := downJob(t, jobs.Spec{ID: "b", FailAfter: 200 * time.Millisecond})
	j := waitJob(t, js, "b")
	if j.State != jobs.Failed || j.Failures < 2 || j.FailingSince.IsZero() || j.Finished.Sub(j.FailingSince) < 200*time.Millisecond || j.Error == "" {
		t.Fatalf("job %s after %d failures from %s to %s (%s): want failed once 200ms passed without progress", j.State, j.Failures, j.FailingSince, j.Finished, j.Error)
	}
}

// j0 returns job id as it is now.
func j0(t *testing.T, js *jobs.Store, id string) jobs.Job {
	t.Helper()
	j, err := js.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A job tried again after a failed pass keeps when it was due (Job.At, what
// its lateness is measured from); the retry's time is Job.Next.
func TestRetryKeepsWhenTheJobWasDue(t *testing.T) {
	js, d := downJob(t, jobs.Spec{ID: "r"})
	created := j0(t, js, "r")
	waitFor(t, func() bool { return j0(t, js, "r").Failures >= 2 })
	d.down.Store(false)
	j := waitJob(t, js, "r")
	if j.State != jobs.Completed || !j.At.Equal(created.At) || j.Started.Before(j.At) || j.Late() != j.Started.Sub(j.At).Truncate(time.Millisecond) {
		t.Fatalf("job %s due %s, started %s (%s late); created due %s: want the due time kept", j.State, j.At, j.Started, j.Late(), created.At)
	}
}
