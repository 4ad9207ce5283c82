package claims

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// counted counts the record operations of a store.
type counted struct {
	*memsink.Store
	reads, writes int
}

func (c *counted) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	c.reads++
	return c.Store.ReadRecord(ctx, name)
}

func (c *counted) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	c.writes++
	return c.Store.WriteRecord(ctx, name, data, ifVersion)
}

// ClaimNew takes a segment without a record in one write; one whose record
// appeared meanwhile is decided on as Claim decides: another's live claim is
// ErrClaimed (after reading the record once, to tell its own write whose
// answer was lost from another's, and deciding on that read as Claim does:
// it was read twice before issue 33's request count), a released one is
// taken over with its progress; a lost answer of its own write is still its
// claim.
func TestClaimNew(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	c := &counted{Store: st}
	a := newClaimer(t, c, "a", clk)
	ca, err := a.ClaimNew(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if c.reads != 0 || c.writes != 1 {
		t.Fatalf("ClaimNew of a segment without a record: %d reads, %d writes; want 0 and 1", c.reads, c.writes)
	}
	c.reads, c.writes = 0, 0
	b := newClaimer(t, c, "b", clk)
	if _, err := b.ClaimNew(ctx, "a.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("ClaimNew of a claimed segment = %v, want ErrClaimed", err)
	}
	if c.reads != 1 || c.writes != 1 {
		t.Fatalf("ClaimNew of a claimed segment: %d reads, %d writes; want 1 and 1", c.reads, c.writes)
	}
	if err := ca.Save(ctx, json.RawMessage(`{"seq":3}`)); err != nil {
		t.Fatalf("the claim ClaimNew took: %v", err)
	}
	if err := ca.ReleaseDecided(ctx, func(string) (json.RawMessage, string) { return json.RawMessage(`{"seq":4}`), "" }); err != nil {
		t.Fatal(err)
	}
	cb2, err := b.ClaimNew(ctx, "a.dlq")
	if err != nil {
		t.Fatalf("ClaimNew of a released segment (a listing that missed its record): %v", err)
	}
	if got := string(cb2.Progress()); got != `{"seq":4}` {
		t.Fatalf("ClaimNew of a released segment took progress %s, want the released one", got)
	}
	if err := cb2.Release(ctx); err != nil {
		t.Fatal(err)
	}

	st.Put(sink.AreaReady, "b.dlq", []byte("segment b"))
	l := &lossy{Store: st}
	cb, err := newClaimer(t, l, "c", clk).ClaimNew(ctx, "b.dlq")
	if err != nil {
		t.Fatalf("ClaimNew whose write reported failure: %v", err)
	}
	if err := cb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// SaveFinal fences the claim: Finish within the trusted time writes the
// record once less, and a claim taken over after it fails Finish before the
// segment goes.
func TestSaveFinalFences(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	c := &counted{Store: st}
	a := newClaimer(t, c, "a", clk)
	ca, err := a.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.SaveFinal(ctx, json.RawMessage(`{"done":true}`), Destination{Delete: true}); err != nil {
		t.Fatal(err)
	}
	data, _, _ := st.ReadRecord(ctx, "a.dlq")
	if rec, _ := Parse(data); rec.State != StateFinishing || string(rec.Progress) != `{"done":true}` {
		t.Fatalf("record after SaveFinal: %s", data)
	}
	c.writes = 0
	if err := ca.Finish(ctx, Destination{Delete: true}); err != nil {
		t.Fatal(err)
	}
	if c.writes != 0 {
		t.Fatalf("Finish after SaveFinal wrote the record %d times, want 0", c.writes)
	}
	if st.Get(sink.AreaReady, "a.dlq") != nil {
		t.Fatal("Finish left the segment")
	}

	// Past its trusted time, Finish fences again: a claim taken over
	// meanwhile fails there. The taker completed the delete SaveFinal
	// decided, rather than restoring the segment.
	st.Put(sink.AreaReady, "b.dlq", []byte("segment b"))
	cb, err := a.Claim(ctx, "b.dlq")
	if err != nil {
		t.Fatal(err)
	}
	if err := cb.SaveFinal(ctx, json.RawMessage(`{"done":true}`), Destination{Delete: true}); err != nil {
		t.Fatal(err)
	}
	other := newClaimer(t, st, "other", clk)
	if _, err := other.Claim(ctx, "b.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("first look: %v", err)
	}
	clk.Advance(lease + time.Second)
	_, err = other.Claim(ctx, "b.dlq")
	var fin *Finished
	if !errors.As(err, &fin) || !fin.To.Delete || fin.Owner != "a" || string(fin.Progress) != `{"done":true}` {
		t.Fatalf("takeover after the lease: %v, want a *Finished completing a's delete", err)
	}
	if st.Get(sink.AreaReady, "b.dlq") != nil {
		t.Fatal("the taker did not complete the delete")
	}
	if err := cb.Finish(ctx, Destination{Delete: true}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Finish of a claim taken over after SaveFinal = %v, want ErrLeaseLost", err)
	}
}
