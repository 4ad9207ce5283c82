package dlqdump_test

import (
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// carvedNotWritten runs a carving pass over batch 0 of st's segment (40
// records, two batches) that fails staging the side segment: the segment's
// progress lists the 20 carved records, not yet in a side segment.
func carvedNotWritten(t *testing.T, st *memsink.Store) {
	t.Helper()
	pt, err := faults.ParsePoint("Reader.Create#1/fail") // the side segment's staging
	if err != nil {
		t.Fatal(err)
	}
	r := newRestorer(t, dlqdump.Config{Reader: faults.WrapReader(st, faults.New(pt)), Queue: newCarveDest(nil)})
	if rep, err := r.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Carve: true}); err == nil || rep.Carved != 20 {
		t.Fatalf("the carving pass: %+v, %v; want it failed writing its side segment", rep, err)
	}
}

// The views (cat, stat, ls, errors, quarantine ls, the console) of a
// segment whose progress lists carved records not yet in a side segment
// show them as still to restore, and the note says a side segment is
// pending. Before, inspect.Claim's Skip, Aside and Remaining ignored carved
// runs: the 20 carved records were shown as handled.
func TestViewsOfACarvedProgress(t *testing.T) {
	st := carveStore(t, 40, 2)
	name := st.Names(sink.AreaReady)[0]
	carvedNotWritten(t, st)
	data, _, err := st.ReadRecord(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := claims.Parse(data)
	if !ok {
		t.Fatal("the record does not parse")
	}
	cv := inspect.NewClaim(rec)
	shown := 0
	for seq := range uint64(40) {
		if !cv.Skip(seq) {
			shown++
		}
	}
	note := cv.Note(sink.AreaReady, 40, true)
	if shown != 40 || !strings.Contains(note, "40 remaining") || !strings.Contains(note, "20 carved") || !strings.Contains(note, "pending") {
		t.Fatalf("the views show %d of the segment's 40 records still to restore; note %q", shown, note)
	}
	if j := cv.JSON(40, true); j.Remaining == nil || *j.Remaining != 40 {
		t.Fatalf("JSON remaining: %+v", j)
	}
}

// A dry run (a job's estimate, Left) over a segment whose progress lists
// carved records not yet in a side segment counts those it selects as
// deliverable, as a restore delivers them. Before, it skipped them: it
// estimated 20 for a restore of everything (40) and 0 for batch 0 (20).
func TestDryRunEstimateOverCarvedProgress(t *testing.T) {
	st := carveStore(t, 40, 2)
	carvedNotWritten(t, st)
	dry := newRestorer(t, dlqdump.Config{Reader: st, Queue: newCarveDest(nil)})
	all, err := dry.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	b0, err := dry.Run(t.Context(), dlqdump.RunOptions{DryRun: true, Where: dlqdump.Headers{"batch": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	b1, err := dry.Run(t.Context(), dlqdump.RunOptions{DryRun: true, Where: dlqdump.Headers{"batch": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if all.Delivered != 40 || b0.Delivered != 20 || b1.Delivered != 20 {
		t.Fatalf("dry-run estimates %d (all), %d (batch 0), %d (batch 1); want 40, 20, 20", all.Delivered, b0.Delivered, b1.Delivered)
	}
	got := newCarveDest(nil)
	rep, err := newRestorer(t, dlqdump.Config{Reader: st, Queue: got}).Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}})
	if err != nil || rep.Delivered != 20 {
		t.Fatalf("a batch-0 restore after: %+v, %v", rep, err)
	}
}
