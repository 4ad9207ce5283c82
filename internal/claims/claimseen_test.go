package claims

import (
	"encoding/json"
	"errors"
	"testing"
)

// ClaimSeen claims what Look read in one write, with the progress given: a
// record changed since the look, or seen live, is ErrClaimed and nothing is
// written over it.
func TestClaimSeen(t *testing.T) {
	st, clk := setup(t)
	ctx := t.Context()
	c := &counted{Store: st}
	a := newClaimer(t, c, "a", clk)
	b := newClaimer(t, c, "b", clk)

	seen, err := a.Look(ctx, "j")
	if err != nil || seen.Record != nil || seen.Live {
		t.Fatalf("Look at no record = %+v, %v", seen, err)
	}
	cl, err := a.ClaimSeen(ctx, seen, json.RawMessage(`{"state":"running"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.reads != 1 || c.writes != 1 {
		t.Fatalf("a look and a claim: %d reads, %d writes; want 1 and 1", c.reads, c.writes)
	}
	if got := string(cl.Progress()); got != `{"state":"running"}` {
		t.Fatalf("the claim's progress = %s, want what ClaimSeen wrote", got)
	}
	// Seen live by b: not claimed.
	seenB, err := b.Look(ctx, "j")
	if err != nil || !seenB.Live {
		t.Fatalf("Look at a live claim = %+v, %v", seenB, err)
	}
	if _, err := b.ClaimSeen(ctx, seenB, nil); !errors.Is(err, ErrClaimed) {
		t.Fatalf("ClaimSeen of a live claim = %v, want ErrClaimed", err)
	}
	if err := cl.ReleaseDecided(ctx, func(string) (json.RawMessage, string) { return json.RawMessage(`{"state":"pending"}`), "" }); err != nil {
		t.Fatal(err)
	}
	// Looked at released, changed before the claim (a request written
	// in): ErrClaimed, and the change stays.
	seenB, err = b.Look(ctx, "j")
	if err != nil || seenB.Live || seenB.Record == nil {
		t.Fatalf("Look at a released record = %+v, %v", seenB, err)
	}
	data, version, err := st.ReadRecord(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := Parse(data)
	rec.Control = "cancel"
	if _, err := st.WriteRecord(ctx, "j", rec.marshal(), version); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ClaimSeen(ctx, seenB, json.RawMessage(`{"state":"running"}`)); !errors.Is(err, ErrClaimed) {
		t.Fatalf("ClaimSeen of a record changed since = %v, want ErrClaimed", err)
	}
	data, _, _ = st.ReadRecord(ctx, "j")
	if rec, _ := Parse(data); rec.Control != "cancel" || rec.Held() || string(rec.Progress) != `{"state":"pending"}` {
		t.Fatalf("the record after a refused ClaimSeen = %+v", rec)
	}
	// Looked at again: claimed, the request kept.
	seenB, _ = b.Look(ctx, "j")
	clB, err := b.ClaimSeen(ctx, seenB, nil)
	if err != nil {
		t.Fatal(err)
	}
	if clB.Control() != "cancel" || string(clB.Progress()) != `{"state":"pending"}` {
		t.Fatalf("ClaimSeen of the record as changed: control %q, progress %s", clB.Control(), clB.Progress())
	}
}
