package jobs_test

import (
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
)

// progressGate holds the destination at the records it is told to.
type progressGate struct {
	mu      sync.Mutex
	at      int           // the delivery to hold at (0: none)
	reached chan struct{} // closed when it is held
	release chan struct{}
}

func (p *progressGate) hold(at int) (reached, release chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at, p.reached, p.release = at, make(chan struct{}), make(chan struct{})
	return p.reached, p.release
}

func (p *progressGate) block(n int) {
	p.mu.Lock()
	if p.at == 0 || n != p.at {
		p.mu.Unlock()
		return
	}
	reached, release := p.reached, p.release
	p.mu.Unlock()
	close(reached)
	<-release
}

// Job.Progressed is when the counts were written: a pass that has written
// none yet (resumed, retried, taken over, its window open again) does not
// carry the time of the last pass's, or a reader measures this pass's
// first blocks over the pause (a job at 200/s read 0.5/s for a rate window
// after a resume an hour later).
func TestProgressedIsOfThisPass(t *testing.T) {
	st := memsink.New()
	dump(t, st, 40, 5)
	gate := &progressGate{}
	reached, release := gate.hold(8) // in the second segment: one block written
	d := &dest{block: gate.block}
	js, rn := runnerOn(t, st, st, d, 1, jobs.RunnerOptions{Owner: "A"})
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	_ = rn.Start()
	<-reached
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(ctx, "p")
		return err == nil && !j.Progressed.IsZero()
	})
	if _, err := js.Pause(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	close(release)
	j = waitState(t, js, "p", jobs.Paused)
	before := j.Progressed
	if before.IsZero() {
		t.Fatalf("paused after a block with no Progressed: %+v", j)
	}
	reached, release = gate.hold(d.count() + 1) // the resumed pass's first record
	defer close(release)
	resumed := time.Now().UTC()
	if _, err := js.Resume(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	<-reached
	j, err := js.Get(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.Running {
		t.Fatalf("resumed job in its first block: %+v", j)
	}
	if !j.Progressed.IsZero() && j.Progressed.Before(resumed) {
		t.Fatalf("resumed job, before its pass wrote any counts, says they were written at %s (the last pass's, %s before the resume)",
			j.Progressed.Format(time.RFC3339Nano), resumed.Sub(j.Progressed))
	}
}
