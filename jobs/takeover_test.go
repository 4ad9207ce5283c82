package jobs_test

import (
	"context"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// freezer is a store one runner works through that freezes once a write of
// a segment's record satisfies when: that write took effect, and it and
// every later call through the freezer wait until thaw, as a process stopped
// past its lease (SIGSTOP, a VM paused) that another takes over from.
type freezer struct {
	*memsink.Store
	when func(p claims.Progress) bool

	mu     sync.Mutex
	frozen chan struct{} // closed once frozen
	thawed chan struct{}
	isCold bool
}

func newFreezer(st *memsink.Store, when func(claims.Progress) bool) *freezer {
	return &freezer{Store: st, when: when, frozen: make(chan struct{}), thawed: make(chan struct{})}
}

func (f *freezer) wait() {
	f.mu.Lock()
	cold := f.isCold
	f.mu.Unlock()
	if cold {
		<-f.thawed
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	if !f.isCold {
		f.isCold = true
		close(f.frozen)
	}
	f.mu.Unlock()
	<-f.thawed
}

func (f *freezer) thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

func (f *freezer) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	f.wait()
	return f.Store.ReadRecord(ctx, name)
}

func (f *freezer) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	f.wait()
	v, err := f.Store.WriteRecord(ctx, name, data, ifVersion)
	if err == nil {
		if rec, ok := claims.Parse(data); ok && rec.Held() {
			if p, perr := claims.ParseProgress(rec.Progress); perr == nil && f.when(p) {
				f.freeze()
			}
		}
	}
	return v, err
}

func (f *freezer) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	f.wait()
	return f.Store.DeleteRecord(ctx, name, ifVersion)
}

func (f *freezer) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	f.wait()
	return f.Store.Move(ctx, name, from, to, reason)
}

func (f *freezer) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f.wait()
	return f.Store.Open(ctx, area, name)
}

func (f *freezer) Table(name string) (sink.Records, error) {
	t, err := f.Store.Table(name)
	if err != nil {
		return nil, err
	}
	return &frozenTable{Records: t, f: f}, nil
}

type frozenTable struct {
	sink.Records
	f *freezer
}

func (t *frozenTable) ReadRecord(ctx context.Context, key string) ([]byte, string, error) {
	t.f.wait()
	return t.Records.ReadRecord(ctx, key)
}

func (t *frozenTable) WriteRecord(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	t.f.wait()
	return t.Records.WriteRecord(ctx, key, data, ifVersion)
}

func (t *frozenTable) DeleteRecord(ctx context.Context, key, ifVersion string) error {
	t.f.wait()
	return t.Records.DeleteRecord(ctx, key, ifVersion)
}

func (t *frozenTable) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	t.f.wait()
	return t.Records.RecordNames(ctx)
}

// frozenRunner makes runner A over f (jobs and segments) delivering into
// d, with lease, and runner B over st; A is thawed and closed when the test
// ends.
func frozenRunner(t *testing.T, f *freezer, st *memsink.Store, d *ctlDest) (js *jobs.Store, a, b *jobs.Runner) {
	t.Helper()
	mk := func(rd sink.Reader, owner string) (*jobs.Store, *jobs.Runner) {
		js, err := jobs.Open(rd)
		if err != nil {
			t.Fatal(err)
		}
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d,
			Lease: 300 * time.Millisecond, MaxAttempts: 1, Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, &jobs.RunnerOptions{Owner: owner, Lease: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.thaw(); _ = rn.Close(); _ = r.Close() })
		return js, rn
	}
	_, a = mk(f, "A")
	js, b = mk(st, "B")
	return js, a, b
}

// A quarantine job whose runner stopped (past its lease) in the middle of
// a segment it had released from quarantine is taken over, and the taker
// finishes that segment too: every record is delivered and nothing is left
// ready.
func TestQuarantineJobTakenOverMidSegment(t *testing.T) {
	st := memsink.New()
	dump(t, st, 6000, 2000)
	ctx := t.Context()
	for _, name := range segmentNames(t, st) {
		if err := st.Move(ctx, name, sink.AreaReady, sink.AreaQuarantine, "test"); err != nil {
			t.Fatal(err)
		}
	}
	d := &ctlDest{}
	f := newFreezer(st, func(p claims.Progress) bool { return p.Delivered >= 900 && !p.Done })
	js, a, b := frozenRunner(t, f, st, d)
	if _, err := js.Create(ctx, jobs.Spec{ID: "q", Area: "quarantine"}); err != nil {
		t.Fatal(err)
	}
	_ = a.Start()
	<-f.frozen // A stopped in the middle of the first segment it released
	_ = b.Start()
	j := waitJob(t, js, "q")
	left := len(st.Names(sink.AreaReady)) + len(st.Names(sink.AreaQuarantine))
	if j.State != jobs.Completed || d.distinct() != 6000 || left != 0 {
		t.Fatalf("quarantine job %s after a takeover: %d of 6000 records delivered, %d segments left ready or quarantined (ready %v)", j.State, d.distinct(), left, st.Names(sink.AreaReady))
	}
}

// Limit holds across a takeover from a runner stopped right after a
// segment's checkpoint: the taker delivers no record more than the limit,
// and the job's record says at least what was delivered.
func TestLimitHoldsAcrossATakeover(t *testing.T) {
	st := memsink.New()
	dump(t, st, 2000, 2000)
	ctx := t.Context()
	d := &ctlDest{}
	f := newFreezer(st, func(p claims.Progress) bool { return p.Delivered >= 100 })
	js, a, b := frozenRunner(t, f, st, d)
	if _, err := js.Create(ctx, jobs.Spec{ID: "lim", Limit: 500, Segments: segmentNames(t, st)}); err != nil {
		t.Fatal(err)
	}
	_ = a.Start()
	<-f.frozen // A stopped right after a checkpoint of the segment
	_ = b.Start()
	j := waitJob(t, js, "lim")
	n, _ := d.delivered()
	if j.State != jobs.Completed || d.distinct() > 500 || j.Delivered < uint64(d.distinct()) || n > 500+64 {
		t.Fatalf("job %s with Limit 500: %d distinct records delivered (%d deliveries), its record says %d; want at most 500, the record at least that", j.State, d.distinct(), n, j.Delivered)
	}
}
