package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// longRunner makes a runner of one Restorer over rd into d with the given
// lease and poll interval.
func longRunner(t *testing.T, rd sink.Reader, d *ctlDest, owner string, lease, poll time.Duration) (*jobs.Store, *jobs.Runner) {
	t.Helper()
	js, err := jobs.Open(rd)
	if err != nil {
		t.Fatal(err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d,
		Lease: lease, MaxAttempts: 1, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Owner: owner, Lease: lease, PollInterval: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	return js, rn
}

// A runner that stops gracefully hands its job over: a peer that saw the
// job running (and so holds off from it for half a lease, here half an
// hour) starts it at its next poll.
func TestGracefulStopHandsOver(t *testing.T) {
	st := memsink.New()
	dumpOneBlock(t, st, 400)
	d := &ctlDest{}
	reached, release := d.hold(10)
	js, a := longRunner(t, st, d, "A", time.Hour, 20*time.Millisecond)
	_, b := longRunner(t, st, d, "B", time.Hour, time.Hour)
	ctx := t.Context()
	for _, rn := range []*jobs.Runner{a, b, a} {
		if err := rn.Hear(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Create(ctx, jobs.Spec{ID: "h", Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = a.Start()
	<-reached
	if _, err := b.RunDue(ctx); err != nil { // B sees it run by A
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	// A told its job to stop when its heartbeat is gone (a runner that
	// removed it last is given a second).
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && heard(t, js, "A"); {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	var j jobs.Job
	waitFor(t, func() bool {
		if _, err := b.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		j, err = js.Get(ctx, "h")
		return err == nil && j.Runner == "B" && j.State != jobs.Pending
	})
	j = waitJob(t, js, "h")
	if n, twice := d.delivered(); j.State != jobs.Completed || n != 400 || twice != 0 {
		t.Fatalf("job %s handed over: %d delivered, %d twice", j.State, n, twice)
	}
}

// A job created due now is noticed by an idle runner without waiting for
// its next listing (here an hour away), on a directory and in memory.
func TestNewJobNoticedAtOnce(t *testing.T) {
	for _, kind := range []string{"memory", "directory"} {
		t.Run(kind, func(t *testing.T) {
			var rd sink.Reader
			if kind == "memory" {
				st := memsink.New()
				dumpOneBlock(t, st, 10)
				rd = st
			} else {
				dir := t.TempDir()
				q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte})
				if err != nil {
					t.Fatal(err)
				}
				for i := range 10 {
					if err := q.Enqueue("x" + string(rune('0'+i))); err != nil {
						t.Fatal(err)
					}
				}
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				rd = &fs.Reader{Directory: dir}
			}
			d := &ctlDest{}
			_, rn := longRunner(t, rd, d, "A", time.Minute, time.Hour)
			_ = rn.Start()
			waitFor(t, rn.Listed) // its next listing is an hour away
			ctl, err := jobs.Open(rd)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ctl.Create(t.Context(), jobs.Spec{ID: "now"}); err != nil {
				t.Fatal(err)
			}
			j := waitJob(t, ctl, "now")
			if j.State != jobs.Completed || j.Delivered != 10 {
				t.Fatalf("job %+v", j)
			}
		})
	}
}

// waitGone waits until runner owner's heartbeat is gone: its Close told its
// jobs to stop.
func waitGone(t *testing.T, js *jobs.Store, owner string) {
	t.Helper()
	waitFor(t, func() bool { return !heard(t, js, owner) })
}

// heard reports whether runner owner's heartbeat is in the store.
func heard(t *testing.T, js *jobs.Store, owner string) bool {
	for ri, err := range js.Runners(t.Context()) {
		if err == nil && ri.Owner == owner {
			return true
		}
	}
	return false
}

// A claim that takes effect as its runner closes, its answer cut short by
// the Close (an S3 request whose context is cancelled after the server
// applied it), leaves no job held by a runner that will never run it: it is
// handed over, and another runner runs it at once rather than after the
// lease (here an hour).
func TestClaimLandingAsTheRunnerCloses(t *testing.T) {
	st := memsink.New()
	dumpOneBlock(t, st, 50)
	h := &hooked{Store: st}
	d := &ctlDest{}
	_, a := longRunner(t, h, d, "A", time.Hour, time.Hour)
	js, b := longRunner(t, st, d, "B", time.Hour, time.Hour)
	ctx := t.Context()
	if _, err := js.Create(ctx, jobs.Spec{ID: "c", Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	claimed := make(chan struct{})
	h.set(func(h *hooked) {
		h.answer = func(ctx context.Context, table, key string, data []byte) error {
			if table != "jobs" || !strings.Contains(string(data), `"token"`) {
				return nil
			}
			var err error
			once.Do(func() {
				defer close(claimed)
				go func() { _ = a.Close() }()
				select { // the answer waits for Close, for a second at most
				case <-ctx.Done():
					err = ctx.Err()
				case <-time.After(time.Second):
				}
			})
			return err
		}
	})
	_ = a.Start() // its polls run on the runner's context, which Close cancels
	<-claimed
	var j jobs.Job
	waitFor(t, func() bool {
		if _, err := b.RunDue(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		j, err = js.Get(ctx, "c")
		return err == nil && j.State == jobs.Completed
	})
	if j.Runner != "B" || d.distinct() != 50 {
		t.Fatalf("job %+v; want it completed by B", j)
	}
}
