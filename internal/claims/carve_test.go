package claims

import (
	"encoding/json"
	"errors"
	"strings"
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
		`{"offset":64,"seq":7,"reasons":["carved"],"aside":[{"o":32,"f":1,"t":9,"q":true,"c":true}]}`,
		`{"offset":64,"seq":9,"reasons":["a","carved"],"aside":[{"o":32,"f":1,"t":9,"q":true,"c":true}]}`,
		`{"offset":64,"seq":9,"aside":[{"o":32,"f":1,"t":9,"c":true}]}`,
		`{"offset":64,"seq":7,"writing":["a","b","c","d","e"]}`,
		`{"offset":64,"seq":7,"writing":[""]}`,
	} {
		if _, err := ParseProgress([]byte(bad)); err == nil {
			t.Fatalf("parsed %s", bad)
		}
	}
}

// On the store a progress's carved runs are runs set aside for quarantine,
// marked, with a reason of their own saying what they are: a dlqdump older
// than carving (which ignores "carve" and "writing") sends them to
// quarantine, or distrusts the progress, instead of taking them for
// delivered. Before, they were stored under "carve": an older dlqdump's
// plain restore finished the segment without them, losing them.
func TestProgressCarveStoredAsQuarantine(t *testing.T) {
	var p Progress
	for seq := uint64(0); seq < 8; seq++ {
		if seq < 4 {
			p.CarveRecord(32, seq)
		} else {
			p.SetAside(64, seq, seq%2 == 0, "decode")
		}
	}
	p.Offset, p.Seq, p.Done = 96, 8, true
	p.Writing = []string{"side.dlq"}
	raw := p.Marshal()
	var old struct {
		Aside []struct {
			Offset     int64  `json:"o"`
			From       uint64 `json:"f"`
			To         uint64 `json:"t"`
			Quarantine bool   `json:"q"`
			Reason     int    `json:"r"`
		} `json:"aside"`
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), `"carve"`) || len(old.Aside) < 2 || old.Aside[0].From != 0 || old.Aside[0].To != 4 || !old.Aside[0].Quarantine ||
		!strings.Contains(old.Reasons[old.Aside[0].Reason], "side.dlq") || !strings.Contains(old.Reasons[old.Aside[0].Reason], "release them from quarantine") {
		t.Fatalf("stored as %s", raw)
	}
	got, err := ParseProgress(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Carve) != 1 || got.Carve[0].Offset != 32 || got.Carve[0].To != 4 || got.Carve[0].Records() != 4 || got.Carve[0].Quarantine || len(got.Reasons) != 1 || got.Reasons[0] != "decode" || len(got.Aside) != len(p.Aside) {
		t.Fatalf("parsed back %+v from %s", got, raw)
	}
	for i, a := range got.Aside {
		if a.Carved || a.From != p.Aside[i].From || a.Quarantine != p.Aside[i].Quarantine || a.Reason != p.Aside[i].Reason {
			t.Fatalf("aside run %d: %+v, want %+v", i, a, p.Aside[i])
		}
	}
}
