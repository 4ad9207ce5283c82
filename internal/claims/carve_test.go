package claims

import (
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// A side segment reserved named (ReserveNamed) is not claimable while its
// parent, still ready, names it in its progress (Progress.Writing, the
// runs it holds still listed there), and claimable once the parent's
// progress no longer names it, the parent still ready (a carving pass
// leaves it so). One reserved unnamed (an older dlqdump's) waits until the
// parent is no longer ready, whatever its progress says.
func TestPendingSideNamedByParent(t *testing.T) {
	st, clk := setup(t) // a.dlq is the parent
	ctx := t.Context()
	c := newClaimer(t, st, "c", clk)
	parent, err := c.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	carving := Progress{Offset: 64, Seq: 10, Carve: []Aside{{Offset: 32, From: 1, To: 9}}, Writing: []string{"side.dlq"}}
	if err := parent.Save(ctx, carving.Marshal()); err != nil {
		t.Fatal(err)
	}
	if err := c.ReserveNamed(ctx, "side.dlq", "a.dlq"); err != nil {
		t.Fatal(err)
	}
	if err := c.Reserve(ctx, "old.dlq", "a.dlq"); err != nil {
		t.Fatal(err)
	}
	st.Put(sink.AreaReady, "side.dlq", []byte("side"))
	st.Put(sink.AreaReady, "old.dlq", []byte("side"))
	if _, err := c.Claim(ctx, "side.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("claim of a side segment its parent's progress names: %v", err)
	}
	if err := parent.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "side.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("claim of a side segment its released parent's progress names: %v", err)
	}
	parent, err = c.Claim(ctx, "a.dlq")
	if err != nil {
		t.Fatal(err)
	}
	carved := Progress{Offset: 64, Seq: 10, Sides: 1}
	if err := parent.Save(ctx, carved.Marshal()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "old.dlq"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("claim of an unnamed side segment while its parent is ready: %v", err)
	}
	cl, err := c.Claim(ctx, "side.dlq")
	if err != nil {
		t.Fatalf("claim once the parent's progress no longer names it: %v", err)
	}
	if rec := cl.Record(); rec.State != StateOpen || rec.Parent != "" || rec.Named {
		t.Fatalf("the claimed side's record: %+v", rec)
	}
}

// A progress lists its carved runs and the side segments being written
// within bounds: too many names, or a carved run after the position, is
// damage.
func TestProgressCarveParse(t *testing.T) {
	var p Progress
	for _, seq := range []uint64{1, 3, 5} {
		p.CarveRecord(32, seq)
		p.SetAside(32, seq+1, false, "")
	}
	p.Offset, p.Seq = 64, 7
	p.Writing = []string{"side.dlq"}
	got, err := ParseProgress(p.Marshal())
	if err != nil || len(got.Carve) != 1 || got.Carve[0].Records() != 3 || len(got.Aside) != 1 || got.Writing[0] != "side.dlq" {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	for _, bad := range []string{
		`{"offset":64,"seq":7,"carve":[{"o":32,"f":1,"t":9}]}`,
		`{"offset":64,"seq":7,"writing":["a","b","c","d","e"]}`,
		`{"offset":64,"seq":7,"writing":[""]}`,
	} {
		if _, err := ParseProgress([]byte(bad)); err == nil {
			t.Fatalf("parsed %s", bad)
		}
	}
}
