package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// clock is a fake monotonic clock shared by the claimers of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const lease = 30 * time.Second

func newClaimer(t *testing.T, st sink.Reader, owner string, clk *clock) *Claimer {
	t.Helper()
	c, err := NewClaimer(st, owner, lease, &Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func setup(t *testing.T) (*memsink.Store, *clock) {
	st := memsink.New()
	st.Put(sink.AreaReady, "a.dlq", []byte("segment a"))
	return st, newClock()
}

func TestSameOwnerNeverTakesALiveClaim(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	a := newClaimer(t, st, "orders", clk)
	b := newClaimer(t, st, "orders", clk) // a replica with the same name
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
			t.Fatalf("second restorer with the same owner: %v, want ErrClaimed", err)
		}
		clk.Advance(lease / 3)
		if err := ca.Save(ctx, json.RawMessage(`{"seq":1}`)); err != nil {
			t.Fatalf("renew: %v", err)
		}
	}
	if _, err := a.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("the same Claimer claiming again: %v, want ErrClaimed", err)
	}
}

func TestTakeoverAfterUnchangedLease(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	b := newClaimer(t, st, "b", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(ctx, json.RawMessage(`{"seq":7}`)); err != nil {
		t.Fatal(err)
	}
	// b first sees the claim now; the holder then dies. b must wait a
	// whole lease from its own first sight, whatever the wall clocks say.
	if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("first look: %v, want ErrClaimed", err)
	}
	clk.Advance(lease - time.Millisecond)
	if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("before a lease passed: %v, want ErrClaimed", err)
	}
	clk.Advance(time.Millisecond)
	cb, err := b.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatalf("after the lease: %v", err)
	}
	if string(cb.Progress()) != `{"seq":7}` {
		t.Fatalf("progress taken over = %s, want the holder's", cb.Progress())
	}
	if err := ca.Save(ctx, nil); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's Save = %v, want ErrLeaseLost", err)
	}
	if err := ca.Release(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's Release = %v, want ErrLeaseLost", err)
	}
	if err := ca.Finish(ctx, Destination{Delete: true}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old holder's Finish = %v, want ErrLeaseLost", err)
	}
	if st.Get(sink.AreaReady, "a.dlq") == nil {
		t.Fatal("the old holder's Finish deleted the segment")
	}
}

func TestHolderStopsTrustingBeforeObserversTakeOver(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	took := clk.Now()
	if got, want := ca.TrustedUntil(), took.Add(lease-Margin(lease)); !got.Equal(want) {
		t.Fatalf("TrustedUntil = %v, want %v", got, want)
	}
	// An observer that read the record at the very moment it was written
	// can take over at took+lease at the earliest: later than the trust.
	if !ca.TrustedUntil().Before(took.Add(lease)) {
		t.Fatal("the holder trusts its claim up to when an observer may take it")
	}
}

func TestReleaseKeepsProgressAndFreesAtOnce(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	b := newClaimer(t, st, "b", clk)
	ca, _ := a.Claim(ctx, "a.dlq")
	if err := ca.Save(ctx, json.RawMessage(`{"seq":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := ca.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(ctx, nil); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Save after Release = %v, want ErrClosed", err)
	}
	cb, err := b.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	if string(cb.Progress()) != `{"seq":3}` {
		t.Fatalf("progress = %s", cb.Progress())
	}
}

func TestFinish(t *testing.T) {
	for _, tc := range []struct {
		name string
		to   Destination
		area sink.Area
		keep bool // record kept
	}{
		{"delete", Destination{Delete: true}, 255, false},
		{"archive", Destination{Area: sink.AreaArchive}, sink.AreaArchive, false},
		{"quarantine", Destination{Area: sink.AreaQuarantine, Reason: "damaged"}, sink.AreaQuarantine, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, clk := setup(t)
			ctx := t.Context()
			a := newClaimer(t, st, "a", clk)
			ca, _ := a.Claim(ctx, "a.dlq")
			if err := ca.Save(ctx, json.RawMessage(`{"seq":9}`)); err != nil {
				t.Fatal(err)
			}
			if err := ca.Finish(ctx, tc.to); err != nil {
				t.Fatal(err)
			}
			if st.Get(sink.AreaReady, "a.dlq") != nil {
				t.Fatal("segment still ready")
			}
			if tc.area != 255 && st.Get(tc.area, "a.dlq") == nil {
				t.Fatalf("segment not in %v", tc.area)
			}
			_, _, err := st.ReadRecord(ctx, "a.dlq")
			if tc.keep != (err == nil) {
				t.Fatalf("record kept = %v, want %v", err == nil, tc.keep)
			}
			if !tc.keep {
				return
			}
			// Released from quarantine, the segment resumes where it was.
			if err := st.Move(ctx, "a.dlq", sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
				t.Fatal(err)
			}
			cb, err := newClaimer(t, st, "b", clk).Claim(ctx, "a.dlq")
			if err != nil {
				t.Fatal(err)
			}
			if !cb.WasQuarantined() || string(cb.Progress()) != `{"seq":9}` {
				t.Fatalf("after release: quarantined %v progress %s", cb.WasQuarantined(), cb.Progress())
			}
		})
	}
}

func TestConcurrentClaimsOneWinner(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		c := newClaimer(t, st, "same", clk)
		wg.Go(func() {
			cl, err := c.Claim(ctx, "a.dlq")
			switch {
			case err == nil:
				wins.Add(1)
				_ = cl
			case !errors.Is(err, ErrClaimed):
				t.Errorf("claimer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d winners, want 1", wins.Load())
	}
}

// lossy is a store whose record writes take effect and report failure
// every other time.
type lossy struct {
	*memsink.Store
	n atomic.Int32
}

var errLost = errors.New("answer lost")

func (l *lossy) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	v, err := l.Store.WriteRecord(ctx, name, data, ifVersion)
	if err == nil && l.n.Add(1)%2 == 1 {
		return "", errLost
	}
	return v, err
}

func (l *lossy) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	if err := l.Store.DeleteRecord(ctx, name, ifVersion); err != nil {
		return err
	}
	return errLost
}

func TestLostAnswersAreHarmless(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	l := &lossy{Store: st}
	a := newClaimer(t, l, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatalf("claim whose write reported failure: %v", err)
	}
	for i := range 6 {
		if err := ca.Save(ctx, json.RawMessage(`{"seq":`+string(rune('0'+i))+`}`)); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	// A delete that took effect and reported failure: Finish is retried.
	if err := ca.Finish(ctx, Destination{Delete: true}); !errors.Is(err, errLost) {
		t.Fatalf("Finish = %v, want the lost answer", err)
	}
	if err := ca.Finish(ctx, Destination{Delete: true}); err != nil {
		t.Fatalf("Finish retried: %v", err)
	}
	if _, _, err := st.ReadRecord(ctx, "a.dlq"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("record after Finish: %v", err)
	}
}

// Found under load by TestFaultsRestore (Reader.DeleteRecord#2/lost, about
// one run in four): Finish's removal of the record took effect and reported
// failure, and the renewal that came before Finish's retry found no record
// and called the claim taken over, so the retry failed with ErrLeaseLost and
// the segment's quarantined records were never counted. The record is gone
// by this claim's own hand: the renewal says the claim ended, and the retry
// of Finish succeeds.
func TestRenewalAfterLostRecordRemovalIsNotALostClaim(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	l := &lossy{Store: st}
	a := newClaimer(t, l, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Finish(ctx, Destination{Delete: true}); !errors.Is(err, errLost) {
		t.Fatalf("Finish = %v, want the lost answer", err)
	}
	if err := ca.Save(ctx, nil); errors.Is(err, ErrLeaseLost) || !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("renewal after the record's removal went through unseen = %v, want an ended claim, not a lost one", err)
	}
	if err := ca.Finish(ctx, Destination{Delete: true}); err != nil {
		t.Fatalf("Finish retried after the renewal: %v", err)
	}
	if err := ca.Finish(ctx, Destination{Delete: true}); !errors.Is(err, sink.ErrClosed) {
		t.Fatalf("Finish after Finish succeeded = %v, want ErrClosed", err)
	}
}

func TestDamagedRecordIsObservedThenTaken(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	if _, err := st.WriteRecord(ctx, "a.dlq", []byte("{not json"), ""); err != nil {
		t.Fatal(err)
	}
	b := newClaimer(t, st, "b", clk)
	if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("damaged record first seen: %v, want ErrClaimed", err)
	}
	clk.Advance(lease)
	if _, err := b.Claim(ctx, "a.dlq"); err != nil {
		t.Fatalf("after a lease: %v", err)
	}
}

func TestLegacyRecords(t *testing.T) {
	for _, tc := range []struct{ name, doc string }{
		{"fs", `{"owner":"h-1-2","token":"","expires":"0001-01-01T00:00:00Z","checkpoint":{"offset":64,"seq":12,"delivered":12,"quarantined":0}}` + "\n"},
		{"s3", `{"v":1,"checkpoint":{"offset":64,"seq":12,"delivered":12,"quarantined":0}}`},
	} {
		r, ok := Parse([]byte(tc.doc))
		if !ok || r.Held() {
			t.Fatalf("%s: parse ok=%v held=%v", tc.name, ok, r.Held())
		}
		var p struct{ Offset, Seq int64 }
		if err := json.Unmarshal(r.Progress, &p); err != nil || p.Offset != 64 || p.Seq != 12 {
			t.Fatalf("%s: progress %s (%v)", tc.name, r.Progress, err)
		}
	}
}

func TestKeeperRenewsAndStops(t *testing.T) {
	st := memsink.New()
	st.Put(sink.AreaReady, "a.dlq", []byte("x"))
	c, err := NewClaimer(st, "a", 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cl, err := c.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	_, v0, _ := st.ReadRecord(ctx, "a.dlq")
	k := Keep(ctx, cl, nil)
	// Wait for a renewal: the record's version changes.
	for {
		_, v, _ := st.ReadRecord(ctx, "a.dlq")
		if v != v0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := k.Hold(); err != nil {
		t.Fatal(err)
	}
	k.SetProgress(json.RawMessage(`{"seq":5}`))
	k.Stop()
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b, _, _ := st.ReadRecord(ctx, "a.dlq")
	r, _ := Parse(b)
	if r.Held() {
		t.Fatal("held after Release")
	}
}

func TestKeeperLosesTheClaim(t *testing.T) {
	st := memsink.New()
	st.Put(sink.AreaReady, "a.dlq", []byte("x"))
	ctx := t.Context()
	c, _ := NewClaimer(st, "a", 300*time.Millisecond, nil)
	cl, _ := c.Claim(ctx, "a.dlq")
	k := Keep(ctx, cl, nil)
	defer k.Stop()
	// Someone rewrites the record (a takeover).
	_, v, _ := st.ReadRecord(ctx, "a.dlq")
	if _, err := st.WriteRecord(ctx, "a.dlq", []byte(`{"v":2,"owner":"b","token":"other","rev":99}`), v); err != nil {
		t.Fatal(err)
	}
	<-k.Context().Done()
	if !k.Lost() {
		t.Fatal("context done but not lost")
	}
	if err := k.Hold(); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Hold = %v, want ErrLeaseLost", err)
	}
}

// Issue 12, defect 9: a claim left "finishing" by a holder that died is a
// claim like any other: taken over once seen unchanged for its lease, with
// its progress, whatever the wall clocks of the machines say.
func TestFinishingClaimIsTakenOver(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	ca, _ := a.Claim(ctx, "a.dlq")
	if err := ca.Save(ctx, json.RawMessage(`{"seq":9,"done":true}`)); err != nil {
		t.Fatal(err)
	}
	// The holder fences its finish, then dies before moving the segment.
	ca.mu.Lock()
	rec := ca.rec
	rec.State = StateFinishing
	err := ca.writeLocked(ctx, "finish", rec)
	ca.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// A record whose wall-clock time is far in the future changes nothing.
	b := newClaimer(t, st, "b", clk)
	if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("first sight of a finishing claim: %v, want ErrClaimed", err)
	}
	clk.Advance(lease)
	cb, err := b.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatalf("a lease later: %v", err)
	}
	if string(cb.Progress()) != `{"seq":9,"done":true}` {
		t.Fatalf("progress %s", cb.Progress())
	}
	if err := cb.Finish(ctx, Destination{Delete: true}); err != nil {
		t.Fatal(err)
	}
	if st.Get(sink.AreaReady, "a.dlq") != nil {
		t.Fatal("segment not finished")
	}
}

// A side segment's pending record keeps it unclaimable while its parent is
// ready; Sweep leaves it then, and removes records of segments gone.
func TestPendingSideAndSweep(t *testing.T) {
	st, clk := setup(t) // a.dlq is the parent
	ctx := t.Context()
	c := newClaimer(t, st, "c", clk)
	if err := c.Reserve(ctx, "side.dlq", "a.dlq"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(ctx, "side.dlq", "a.dlq"); err != nil {
		t.Fatalf("reserving again: %v", err)
	}
	st.Put(sink.AreaReady, "side.dlq", []byte("side"))
	if _, err := c.Claim(ctx, "side.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("claim of a side segment while its parent is ready: %v", err)
	}
	if removed, err := c.Sweep(ctx, "side.dlq"); removed != nil || err != nil {
		t.Fatalf("sweep of a pending record: %v %v", removed, err)
	}
	if err := st.Delete(ctx, sink.AreaReady, "a.dlq"); err != nil {
		t.Fatal(err)
	}
	cl, err := c.Claim(ctx, "side.dlq")
	if err != nil {
		t.Fatalf("claim once the parent is gone: %v", err)
	}
	if err := cl.Finish(ctx, Destination{Delete: true}); err != nil {
		t.Fatal(err)
	}
	// A record left by a finished segment (its holder died before
	// removing it) is swept once seen unchanged for its lease.
	if _, err := st.WriteRecord(ctx, "gone.dlq", []byte(`{"v":2,"owner":"x","token":"t","rev":4,"lease_ms":30000,"state":"finishing"}`), ""); err != nil {
		t.Fatal(err)
	}
	if removed, _ := c.Sweep(ctx, "gone.dlq"); removed != nil {
		t.Fatal("swept a held record at first sight")
	}
	clk.Advance(lease)
	if removed, err := c.Sweep(ctx, "gone.dlq"); removed == nil || err != nil {
		t.Fatalf("sweep a lease later: %v %v", removed, err)
	}
}

// Aside.Since cuts a run at a record, masked or not.
func TestAsideFrom(t *testing.T) {
	var p Progress
	for _, seq := range []uint64{3, 5, 6, 9} {
		p.SetAside(64, seq, false, "")
	}
	run := p.Aside[0]
	for _, tc := range []struct {
		seq  uint64
		want []uint64
	}{{0, []uint64{3, 5, 6, 9}}, {4, []uint64{5, 6, 9}}, {6, []uint64{6, 9}}, {7, []uint64{9}}, {10, nil}} {
		got, ok := run.Since(tc.seq)
		var seqs []uint64
		for s := got.From; ok && s < got.To; s++ {
			if got.Has(s) {
				seqs = append(seqs, s)
			}
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tc.want) || ok != (tc.want != nil) || ok && (got.Offset != 64 || got.Records() != uint64(len(tc.want))) {
			t.Errorf("Since(%d) = %+v %v: records %v, want %v", tc.seq, got, ok, seqs, tc.want)
		}
	}
	plain := Aside{Offset: 8, From: 10, To: 20}
	if got, ok := plain.Since(15); !ok || got.From != 15 || got.To != 20 || got.Records() != 5 {
		t.Errorf("plain Since(15) = %+v %v", got, ok)
	}
}

// LeaveRun lists a block's records from a record on, unread, after the
// records set aside before it: the progress parses back as it was, and a
// run per block counts towards Full as SetAside's do.
func TestLeaveRun(t *testing.T) {
	var p Progress
	p.SetAside(64, 3, false, "")
	p.SetAside(64, 5, true, "refused")
	p.LeaveRun(64, 7, 100)
	p.LeaveRun(4000, 100, 163)
	p.Offset, p.Seq = 6000, 163
	q, err := ParseProgress(p.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	var left uint64
	for _, a := range q.Aside {
		if !a.Quarantine {
			left += a.Records()
		}
	}
	if len(q.Aside) != 4 || left != 1+93+63 || !q.Aside[3].Has(162) || q.Aside[3].Has(163) {
		t.Fatalf("parsed %+v: %d left", q.Aside, left)
	}
	var f Progress
	for i := range MaxAside {
		f.LeaveRun(int64(64+i*100), uint64(i*10), uint64(i*10+10))
	}
	if !f.Full() {
		t.Errorf("%d runs: not full", len(f.Aside))
	}
}
