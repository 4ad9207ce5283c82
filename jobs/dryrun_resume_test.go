package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// slowCutStore holds every segment's Open until released; one cut short by
// its context says so on cut and returns only once proceed is closed (a
// read that takes its time to notice).
type slowCutStore struct {
	*memsink.Store
	opened, cut, proceed chan struct{}
	openOnce, cutOnce    sync.Once
}

func (g *slowCutStore) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	g.openOnce.Do(func() { close(g.opened) })
	select {
	case <-g.proceed:
		return g.Store.Open(ctx, area, name)
	case <-ctx.Done():
	}
	g.cutOnce.Do(func() { close(g.cut) })
	<-g.proceed
	return nil, ctx.Err()
}

// A pause cuts the first dry run short; a resume that withdraws it before
// the dry run returned (Resume says the job runs on) must not leave the job
// paused: the pause was never acted on.
func TestResumeWhileTheDryRunStops(t *testing.T) {
	st := memsink.New()
	items := dump(t, st, 20, 5)
	g := &slowCutStore{Store: st, opened: make(chan struct{}), cut: make(chan struct{}), proceed: make(chan struct{})}
	d := &dest{}
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: g, Decoder: decoder.Fallthrough{AsString: true}, Queue: d, Lease: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Lease: 1500 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	proceed := sync.OnceFunc(func() { close(g.proceed) })
	t.Cleanup(proceed)
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "whole"}); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	<-g.opened // the dry run reads
	if _, err := js.Pause(t.Context(), "whole"); err != nil {
		t.Fatal(err)
	}
	<-g.cut // a renewal found the pause: the dry run stops
	resumed, err := js.Resume(t.Context(), "whole")
	if err != nil || resumed.Request != "" || resumed.State != jobs.Running {
		t.Fatalf("resume: %+v, %v; want the pause withdrawn from the running job", resumed, err)
	}
	var j jobs.Job
	proceed()
	// The real pass reads through the store (the cut Open answers only
	// the cancelled dry run: a later context reads).
	for {
		j, err = js.Get(t.Context(), "whole")
		if err != nil {
			t.Fatal(err)
		}
		if j.State == jobs.Paused {
			t.Fatalf("the job is paused after its pause was withdrawn (Resume returned it %s, request %q); it waits for another resume", resumed.State, resumed.Request)
		}
		if j.State.Final() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if j.State != jobs.Completed || d.count() != len(items) {
		t.Fatalf("after the withdrawn pause: %+v, %d of %d delivered", j, d.count(), len(items))
	}
}
