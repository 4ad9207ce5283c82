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

// gatedStore holds every segment's Open until released (or its context
// ends), saying on opened when the first one waits.
type gatedStore struct {
	*memsink.Store
	opened, release chan struct{}
	once            sync.Once
}

func (g *gatedStore) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	g.once.Do(func() { close(g.opened) })
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Store.Open(ctx, area, name)
}

// oneRestorerRunner returns the jobs of st and a runner of one Restorer
// reading segments through rd into d, both with lease.
func oneRestorerRunner(t *testing.T, st *memsink.Store, rd sink.Reader, d *dest, lease time.Duration) (*jobs.Store, *jobs.Runner) {
	t.Helper()
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Lease: lease, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	return js, rn
}

// pauseDuringTheDryRun creates job "whole", over the whole store, starts rn
// and pauses the job once its dry run opened a segment.
func pauseDuringTheDryRun(t *testing.T, js *jobs.Store, rn *jobs.Runner, opened <-chan struct{}) {
	t.Helper()
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "whole"}); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	<-opened // the dry run reads
	if _, err := js.Pause(t.Context(), "whole"); err != nil {
		t.Fatal(err)
	}
}

// A job over the whole store first counts what it will do, in a dry run
// that reads every segment and has no block boundaries: a pause while it
// reads stops it, and the job is paused having delivered nothing; resumed,
// it runs.
func TestPauseDuringTheFirstDryRun(t *testing.T) {
	st := memsink.New()
	items := dump(t, st, 20, 5)
	g := &gatedStore{Store: st, opened: make(chan struct{}), release: make(chan struct{})}
	d := &dest{}
	js, rn := oneRestorerRunner(t, st, g, d, 300*time.Millisecond)
	released := sync.OnceFunc(func() { close(g.release) })
	t.Cleanup(released) // before the runner's Close, should the dry run still wait
	pauseDuringTheDryRun(t, js, rn, g.opened)
	j := waitState(t, js, "whole", jobs.Paused)
	if j.Delivered != 0 || d.count() != 0 {
		t.Fatalf("paused during its dry run having delivered %d (record: %d); want 0", d.count(), j.Delivered)
	}
	released()
	if _, err := js.Resume(t.Context(), "whole"); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, js, "whole")
	if j.State != jobs.Completed || d.count() != len(items) {
		t.Fatalf("after resume: %+v, %d of %d delivered", j, d.count(), len(items))
	}
}

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
	js, rn := oneRestorerRunner(t, st, g, d, 1500*time.Millisecond)
	proceed := sync.OnceFunc(func() { close(g.proceed) })
	t.Cleanup(proceed)
	pauseDuringTheDryRun(t, js, rn, g.opened)
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
