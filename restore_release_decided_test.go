package dlqdump_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// A quarantined segment whose record still says that a holder is moving it to
// quarantine (the move landed, the record's end did not: seen in
// TestFaultsStalls/gofakes3, a taker completing a stalled holder's move to
// quarantine had its pass cancelled between the two) was released by a
// quarantine pass all the same: the pass moved it to the ready area, could
// not claim it (held), and the next claim completed the decision the record
// held, moving it back to quarantine. The release was undone, and the
// quarantine never emptied. A quarantine pass settles the segment's record
// before releasing it: a live claim leaves it in quarantine for a later pass
// (Report.Claimed), a finish decided there is completed where the segment
// is, and only then is the segment released and restored, delivering nothing
// twice.
func TestReleaseCompletesADecidedQuarantine(t *testing.T) {
	ctx := t.Context()
	items := itemsN("q", 3000)
	dir, name, dst := damagedAndQuarantined(t, items)
	delivered := len(dst.got())
	rd := &fs.Reader{Directory: dir}

	// The record as a taker left it: holding the claim, finishing the
	// segment to quarantine, where it is already.
	data, version, err := rd.ReadRecord(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := claims.Parse(data)
	if !ok || rec.State != claims.StateQuarantined {
		t.Fatalf("the quarantined segment's record: %s", data)
	}
	const lease = 150 * time.Millisecond
	rec.Owner, rec.Token, rec.LeaseMS, rec.Rev = "taker", "stale-taker-token", lease.Milliseconds(), rec.Rev+1
	rec.State, rec.To = claims.StateFinishing, &claims.Destination{Area: sink.AreaQuarantine, Reason: "damaged blocks"}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.WriteRecord(ctx, name, b, version); err != nil {
		t.Fatal(err)
	}

	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst, Owner: "release", Lease: lease})
	// Release the quarantine until it is empty, then drain the ready area
	// (the harness's release): passes until the area is empty, the held
	// record being taken over once seen unchanged for its lease.
	until := func(opts dlqdump.RunOptions, area sink.Area) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for {
			if _, err := r.Run(ctx, opts); err != nil {
				t.Fatalf("pass over %s: %v", area, err)
			}
			if len(namesIn(t, rd, area)) == 0 {
				return
			}
			select {
			case <-time.After(lease / 3):
			case <-ctx.Done():
				t.Fatalf("%s not empty: %v", area, namesIn(t, rd, area))
			}
		}
	}
	until(dlqdump.RunOptions{Area: dlqdump.AreaQuarantine}, sink.AreaQuarantine)
	until(dlqdump.RunOptions{}, sink.AreaReady)

	if q := namesIn(t, rd, sink.AreaQuarantine); len(q) > 0 {
		t.Fatalf("released, the segment is back in quarantine: %v", q)
	}
	if n := len(dst.got()); n != delivered {
		t.Fatalf("released and restored: %d more records delivered, want none", n-delivered)
	}
	if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
		t.Fatalf("the segment is still ready: %v", err)
	}
	if _, _, err := rd.ReadRecord(ctx, name); err == nil {
		t.Fatal("the finished segment's record is left")
	}
}

// namesIn lists an area's segments.
func namesIn(t *testing.T, rd sink.Reader, area sink.Area) []string {
	t.Helper()
	var out []string
	for n, err := range sink.Names(t.Context(), rd, area) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}
