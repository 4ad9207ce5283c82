package claims

import (
	"context"
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// pausingStore runs before once, just before the first Move or Unstage made
// through it: a holder stopped there, past its lease.
type pausingStore struct {
	*memsink.Store
	before func()
}

func (p *pausingStore) pause() {
	if f := p.before; f != nil {
		p.before = nil
		f()
	}
}

func (p *pausingStore) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	p.pause()
	return p.Store.Move(ctx, name, from, to, reason)
}

func (p *pausingStore) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	p.pause()
	return p.Store.Unstage(ctx, staged, name, to, reason)
}

// A holder that fenced its Finish and stopped before moving the segment,
// while another took the claim over, learns that it lost the claim when it
// goes on: its Finish must not succeed, or the records it set aside are
// counted twice. The taker completed the move the holder decided (its
// record said so) instead of working on the segment.
func TestFinishAfterTakeoverIsLost(t *testing.T) {
	mem, clk := setup(t)
	st := &pausingStore{Store: mem}
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	b := newClaimer(t, mem, "b", clk)
	st.before = func() {
		if _, err := b.Claim(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
			t.Fatalf("first sight: %v, want ErrClaimed", err)
		}
		clk.Advance(lease)
		_, err := b.Claim(ctx, "a.dlq")
		var fin *Finished
		if !errors.As(err, &fin) || fin.To.Area != sink.AreaArchive || fin.Owner != "a" {
			t.Fatalf("a lease later: %v, want a *Finished completing a's move to the archive", err)
		}
	}
	err = ca.Finish(ctx, Destination{Area: sink.AreaArchive})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the stopped holder's Finish = %v, want ErrLeaseLost", err)
	}
	if mem.Get(sink.AreaArchive, "a.dlq") == nil {
		t.Fatal("the segment is not archived")
	}
}

// A holder stopped after deciding to publish a segment, while another took
// the claim over (and moved the staged segment into place), finds it in
// place when it goes on.
func TestPublishDecidedThenTakenOver(t *testing.T) {
	mem, clk := setup(t)
	st := &pausingStore{Store: mem}
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(ctx, "side.dlq", "a.dlq"); err != nil {
		t.Fatal(err)
	}
	staged := ca.StagedName("side.dlq")
	mem.Put(sink.AreaStaging, staged, []byte("side"))
	b := newClaimer(t, mem, "b", clk)
	st.before = func() {
		_, _ = b.Claim(ctx, "a.dlq")
		clk.Advance(lease)
		cb, err := b.Claim(ctx, "a.dlq") // moves the decided segment into place
		if err != nil {
			t.Fatalf("a lease later: %v", err)
		}
		if err := cb.Finish(ctx, Destination{Delete: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ca.Publish(ctx, Publication{Staged: staged, Name: "side.dlq", Area: sink.AreaReady}, nil); err != nil {
		t.Fatalf("Publish: %v (the segment was put in place by the taker)", err)
	}
	if string(mem.Get(sink.AreaReady, "side.dlq")) != "side" || len(mem.Names(sink.AreaStaging)) != 0 {
		t.Fatalf("ready %q, staged %q", mem.Names(sink.AreaReady), mem.Names(sink.AreaStaging))
	}
}

// A holder stopped before deciding to publish what it staged, while another
// took the claim over, cannot decide when it goes on; what it staged is
// swept.
func TestPublishAfterTakeoverIsRefused(t *testing.T) {
	mem, clk := setup(t)
	ctx := t.Context()
	a := newClaimer(t, mem, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Reserve(ctx, "side.dlq", "a.dlq"); err != nil {
		t.Fatal(err)
	}
	staged := ca.StagedName("side.dlq")
	mem.Put(sink.AreaStaging, staged, []byte("side"))
	b := newClaimer(t, mem, "b", clk)
	_, _ = b.Claim(ctx, "a.dlq")
	clk.Advance(lease)
	if _, err := b.Claim(ctx, "a.dlq"); err != nil {
		t.Fatal(err)
	}
	// What a claim staged and did not decide before it was taken over
	// will never be published: the sweep removes it.
	if n, err := b.SweepStaging(ctx); err != nil || n != 1 {
		t.Fatalf("SweepStaging = %d, %v; want 1 removed (its claim was taken over)", n, err)
	}
	err = ca.Publish(ctx, Publication{Staged: staged, Name: "side.dlq", Area: sink.AreaReady}, nil)
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Publish after the takeover = %v, want ErrLeaseLost", err)
	}
	if len(mem.Names(sink.AreaReady)) != 1 {
		t.Fatalf("ready: %q, want only a.dlq", mem.Names(sink.AreaReady))
	}
}
