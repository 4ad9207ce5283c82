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

// A job over the whole store first counts what it will do, in a dry run
// that reads every segment and has no block boundaries: a pause while it
// reads stops it, and the job is paused having delivered nothing; resumed,
// it runs.
func TestPauseDuringTheFirstDryRun(t *testing.T) {
	st := memsink.New()
	items := dump(t, st, 20, 5)
	g := &gatedStore{Store: st, opened: make(chan struct{}), release: make(chan struct{})}
	d := &dest{}
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: g, Decoder: decoder.Fallthrough{AsString: true}, Queue: d, Lease: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	released := sync.OnceFunc(func() { close(g.release) })
	t.Cleanup(released) // before the runner's Close, should the dry run still wait
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
