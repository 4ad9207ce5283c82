package claims

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// A holder fenced a move to quarantine and stopped before the move; the
// claim taken over after the lease completes the move (the segment is not
// the taker's to restore), keeping the progress in the record; the stalled
// holder's late move finds it done and its claim lost.
func TestTakeoverCompletesADecidedQuarantine(t *testing.T) {
	mem, clk := setup(t)
	st := &pausingStore{Store: mem}
	ctx := t.Context()
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Save(ctx, json.RawMessage(`{"seq":7}`)); err != nil {
		t.Fatal(err)
	}
	to := Destination{Area: sink.AreaQuarantine, Reason: "version 1", Account: json.RawMessage(`{"n":3}`)}
	b := newClaimer(t, mem, "b", clk)
	st.before = func() {
		// The record says where a takes the segment.
		data, _, _ := mem.ReadRecord(ctx, "a.dlq")
		if rec, _ := Parse(data); rec.State != StateFinishing || rec.To == nil || !rec.To.same(to) || rec.To.Reason != "version 1" {
			t.Fatalf("the fencing write left %s", data)
		}
		if _, _, err := b.Check(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
			t.Fatalf("first look: %v", err)
		}
		clk.Advance(lease)
		var fin *Finished
		if _, _, err := b.Check(ctx, "a.dlq"); !errors.As(err, &fin) || !fin.Pending {
			t.Fatalf("Check a lease later = %v, want a pending *Finished", err)
		}
		if mem.Get(sink.AreaReady, "a.dlq") == nil {
			t.Fatal("Check moved the segment")
		}
		_, err := b.Claim(ctx, "a.dlq")
		if !errors.As(err, &fin) || fin.Pending || fin.Gone || fin.Owner != "a" || !fin.To.same(to) || string(fin.Progress) != `{"seq":7}` {
			t.Fatalf("Claim a lease later = %v, want a *Finished completing a's move", err)
		}
	}
	if err := ca.Finish(ctx, to); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the stalled holder's Finish = %v, want ErrLeaseLost", err)
	}
	if mem.Get(sink.AreaQuarantine, "a.dlq") == nil || mem.Get(sink.AreaReady, "a.dlq") != nil {
		t.Fatalf("ready %q, quarantine %q", mem.Names(sink.AreaReady), mem.Names(sink.AreaQuarantine))
	}
	data, _, _ := mem.ReadRecord(ctx, "a.dlq")
	if rec, _ := Parse(data); rec.State != StateQuarantined || rec.Held() || rec.To != nil || string(rec.Progress) != `{"seq":7}` {
		t.Fatalf("record after the move: %s", data)
	}
	// Released from quarantine, it is claimed as usual, with its progress.
	if err := mem.Move(ctx, "a.dlq", sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
		t.Fatal(err)
	}
	cb, err := b.Claim(ctx, "a.dlq")
	if err != nil || string(cb.Progress()) != `{"seq":7}` || !cb.WasQuarantined() {
		t.Fatalf("claim after the release: %v", err)
	}
}

// A finish decided and then released (the holder's delete failed, and it
// gave up) stays decided: the next claim completes it at once.
func TestReleasedDecisionIsCompleted(t *testing.T) {
	mem, clk := setup(t)
	ctx := t.Context()
	st := &failingDelete{Reader: mem}
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Finish(ctx, Destination{Delete: true}); err == nil {
		t.Fatal("Finish succeeded with a store that fails deletes")
	}
	if err := ca.Release(ctx); err != nil {
		t.Fatal(err)
	}
	data, _, _ := mem.ReadRecord(ctx, "a.dlq")
	if rec, _ := Parse(data); rec.Held() || rec.State != StateFinishing || rec.To == nil || !rec.To.Delete {
		t.Fatalf("record after the release: %s", data)
	}
	b := newClaimer(t, mem, "b", clk)
	var fin *Finished
	if _, err := b.Claim(ctx, "a.dlq"); !errors.As(err, &fin) || !fin.To.Delete {
		t.Fatalf("Claim = %v, want a *Finished completing the delete", err)
	}
	if mem.Get(sink.AreaReady, "a.dlq") != nil || len(mem.Names(sink.AreaReady)) != 0 {
		t.Fatal("the segment is still there")
	}
	if _, _, err := mem.ReadRecord(ctx, "a.dlq"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("the record is left: %v", err)
	}
}

// A decided move whose segment is neither ready nor where it was to go
// (removed meanwhile) is reported gone, and its record removed.
func TestDecidedMoveOfAGoneSegment(t *testing.T) {
	mem, clk := setup(t)
	ctx := t.Context()
	st := &failingDelete{Reader: mem, move: true}
	a := newClaimer(t, st, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Finish(ctx, Destination{Area: sink.AreaArchive}); err == nil {
		t.Fatal("Finish succeeded with a store that fails moves")
	}
	if err := ca.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := mem.Delete(ctx, sink.AreaReady, "a.dlq"); err != nil {
		t.Fatal(err)
	}
	b := newClaimer(t, mem, "b", clk)
	var fin *Finished
	if _, err := b.Claim(ctx, "a.dlq"); !errors.As(err, &fin) || !fin.Gone {
		t.Fatalf("Claim = %v, want a *Finished saying it is gone", err)
	}
	if _, _, err := mem.ReadRecord(ctx, "a.dlq"); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("the record is left: %v", err)
	}
}

// failingDelete fails every delete (with move, every move) of a segment.
type failingDelete struct {
	sink.Reader
	move bool
}

var errInjected = errors.New("injected")

func (f *failingDelete) Delete(ctx context.Context, area sink.Area, name string) error {
	return errInjected
}

func (f *failingDelete) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	if f.move {
		return errInjected
	}
	return f.Reader.Move(ctx, name, from, to, reason)
}
