package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// dest collects what it is given; block, when set, is called before each
// delivery.
type dest struct {
	mu    sync.Mutex
	got   map[string]int
	n     int
	block func(n int)
}

func (d *dest) Enqueue(x any) error {
	d.mu.Lock()
	if d.got == nil {
		d.got = map[string]int{}
	}
	d.got[x.(string)]++
	d.n++
	n, block := d.n, d.block
	d.mu.Unlock()
	if block != nil {
		block(n)
	}
	return nil
}

func (d *dest) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// dump writes n records (reason alternating failed/leak) into st, in
// segments of segSize records.
func dump(t *testing.T, st *memsink.Store, n, segSize int) []string {
	t.Helper()
	var items []string
	for s := 0; s*segSize < n; s++ {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.Writer(), Capacity: 64 * dlqdump.Kilobyte, BlockSize: dlqdump.Kilobyte})
		if err != nil {
			t.Fatal(err)
		}
		for i := s * segSize; i < min(n, (s+1)*segSize); i++ {
			it := fmt.Sprintf("item-%05d", i)
			items = append(items, it)
			reason := []string{"failed", "leak"}[i%2]
			if err := q.Enqueue(dlqdump.Envelope{Item: it, Headers: dlqdump.Headers{dlqdump.HeaderReason: reason}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return items
}

func newRunner(t *testing.T, st *memsink.Store, d *dest, n int) (*jobs.Store, *jobs.Runner) {
	t.Helper()
	js, err := jobs.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	var rs []*dlqdump.Restorer
	for range n {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{AsString: true}, Queue: d,
			Destinations: map[string]queue.Enqueuer{"replay": d}, Lease: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		rs = append(rs, r)
	}
	rn, err := jobs.NewRunner(js, rs, &jobs.RunnerOptions{Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rn.Close() })
	return js, rn
}

func waitJob(t *testing.T, js *jobs.Store, id string) jobs.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	j, err := js.Wait(ctx, id, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("wait for job %s: %v (%+v)", id, err, j)
	}
	return j
}

// A job selecting the failed records delivers them, and only them, into
// its named destination, never before its second; the leaks stay where
// they are.
func TestJobRunsOnceAtItsSecond(t *testing.T) {
	st := memsink.New()
	items := dump(t, st, 400, 100)
	d := &dest{}
	js, rn := newRunner(t, st, d, 2)
	at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second)
	j, err := js.Create(t.Context(), jobs.Spec{ID: "failed-1", At: at, Where: map[string]string{dlqdump.HeaderReason: "failed"}, Destination: "replay"})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != jobs.Pending || !j.At.Equal(at.UTC()) {
		t.Fatalf("created %+v", j)
	}
	// Creating it again with the same spec is no error and no new job.
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "failed-1", At: at, Where: map[string]string{dlqdump.HeaderReason: "failed"}, Destination: "replay"}); err != nil {
		t.Fatalf("the same create again: %v", err)
	}
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "failed-1", At: at}); !errors.Is(err, jobs.ErrExists) {
		t.Fatalf("another spec under the same ID: %v, want ErrExists", err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, js, "failed-1")
	if j.State != jobs.Completed || j.Delivered != 200 || j.Started.Before(at) {
		t.Fatalf("job %+v", j)
	}
	for i, it := range items {
		want := 0
		if i%2 == 0 {
			want = 1
		}
		if d.got[it] != want {
			t.Fatalf("%s delivered %d times, want %d", it, d.got[it], want)
		}
	}
	// The leaks stay ready: a second job takes them.
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "rest"}); err != nil {
		t.Fatal(err)
	}
	if j := waitJob(t, js, "rest"); j.State != jobs.Completed || j.Delivered != 200 {
		t.Fatalf("job rest %+v", j)
	}
	if names := st.Names(sink.AreaReady); len(names) != 0 {
		t.Fatalf("segments left: %v", names)
	}
}

// A running job paused from outside stops at its next block boundary and
// is released; resumed, it goes on; cancelled, it stops and what it did not
// deliver stays where it is.
func TestJobPauseResumeCancel(t *testing.T) {
	st := memsink.New()
	items := dump(t, st, 2000, 500)
	gate := make(chan struct{})
	d := &dest{}
	d.block = func(n int) {
		if n == 100 {
			<-gate
		}
	}
	js, rn := newRunner(t, st, d, 1)
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "slow"}); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return d.count() >= 100 })
	if j, err := js.Pause(t.Context(), "slow"); err != nil || j.Request != "pause" {
		t.Fatalf("pause: %+v %v", j, err)
	}
	close(gate)
	j := waitState(t, js, "slow", jobs.Paused)
	atPause := d.count()
	if uint64(atPause) != j.Delivered {
		t.Fatalf("paused having delivered %d; its record says %d", atPause, j.Delivered)
	}
	if atPause >= len(items) {
		t.Fatalf("paused after delivering everything (%d)", atPause)
	}
	if _, err := js.Resume(t.Context(), "slow"); err != nil {
		t.Fatal(err)
	}
	j = waitJob(t, js, "slow")
	if j.State != jobs.Completed || d.count() != len(items) || j.Delivered != uint64(len(items)) {
		t.Fatalf("after resume: %+v, %d delivered", j, d.count())
	}
	if _, err := js.Cancel(t.Context(), "slow"); !errors.Is(err, jobs.ErrFinished) {
		t.Fatalf("cancel a completed job: %v, want ErrFinished", err)
	}
}

// A job due later is cancelled before it starts: it never runs; a second
// cancel is harmless.
func TestJobCancelledBeforeItsSecond(t *testing.T) {
	st := memsink.New()
	dump(t, st, 100, 100)
	d := &dest{}
	js, rn := newRunner(t, st, d, 1)
	if _, err := js.Create(t.Context(), jobs.Spec{ID: "later", At: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := rn.Start(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"later", "later"} {
		if j, err := js.Cancel(t.Context(), id); err != nil || j.State != jobs.Cancelled {
			t.Fatalf("cancel: %+v %v", j, err)
		}
	}
	if _, err := rn.RunDue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d.count() != 0 {
		t.Fatalf("a cancelled job delivered %d", d.count())
	}
}

// Bad specs are refused at create, naming the field.
func TestJobBadSpec(t *testing.T) {
	js, err := jobs.Open(memsink.New())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec  jobs.Spec
		field string
	}{
		{jobs.Spec{Rate: -1}, "Rate"},
		{jobs.Spec{Area: "archive"}, "Area"},
		{jobs.Spec{ID: "a/b"}, "ID"},
		{jobs.Spec{Since: time.Now(), Until: time.Now().Add(-time.Hour)}, "Until"},
		{jobs.Spec{Windows: []string{"25:00-26:00"}}, "Windows"},
		{jobs.Spec{TimeZone: "Mars/Olympus"}, "TimeZone"},
	} {
		_, err := js.Create(t.Context(), tc.spec)
		if !errors.Is(err, dlqdump.ErrConfig) || !containsWord(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want an ErrConfig naming %s", tc.spec, err, tc.field)
		}
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitState(t *testing.T, js *jobs.Store, id string, s jobs.State) jobs.Job {
	t.Helper()
	var j jobs.Job
	waitFor(t, func() bool {
		var err error
		j, err = js.Get(t.Context(), id)
		return err == nil && j.State == s
	})
	return j
}
