package dlqdump_test

import (
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/sink"
)

// A parent quarantined whole while its carve is in flight keeps its side
// segment pending: the carving pass publishes the side but fails before the
// save that drops the carved runs (the move from staging fails), a restorer
// of another version takes the parent over, completes the publish and
// quarantines the parent (VersionQuarantine), and the parent's progress
// still names the side as being written. Before, the side was free once its
// parent left the ready area: a plain restore delivered it, and the parent,
// released from quarantine, carved and delivered the same 20 records again
// (found by the second review of carving).
func TestCarvedSideOfAQuarantinedParentStaysPending(t *testing.T) {
	st := carveStore(t, 40, 2)
	dst := newCarveDest(nil)
	in := faults.New(faults.Point{Op: faults.OpUnstage, K: 1, Mode: faults.Fail})
	carver := newRestorer(t, dlqdump.Config{Reader: faults.WrapReader(st, in), Queue: dst, Owner: "carver", Lease: 100 * time.Millisecond, MaxAttempts: 1})
	if _, err := carver.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Carve: true}); err == nil {
		t.Fatal("the carving pass succeeded with its side segment's move failing: the test does not test the failure")
	}
	other := newRestorer(t, dlqdump.Config{Reader: st, Queue: dst, Owner: "v7", Lease: 100 * time.Millisecond, Version: 7})
	rep, err := other.Run(t.Context(), dlqdump.RunOptions{WaitClaimed: 2 * time.Second})
	if err != nil || rep.QuarantinedSegments != 1 {
		t.Fatalf("the other version's pass: %d segments quarantined, %v; want the parent quarantined", rep.QuarantinedSegments, err)
	}
	fin := newRestorer(t, dlqdump.Config{Reader: st, Queue: dst, Owner: "final", Lease: 100 * time.Millisecond})
	for range 3 {
		if _, err := fin.Run(t.Context(), dlqdump.RunOptions{WaitClaimed: 2 * time.Second}); err != nil {
			t.Logf("ready pass: %v", err)
		}
		if _, err := fin.Run(t.Context(), dlqdump.RunOptions{Area: dlqdump.AreaQuarantine, WaitClaimed: 2 * time.Second}); err != nil {
			t.Logf("quarantine pass: %v", err)
		}
	}
	onceEach(t, dst.items(), 40)
	if left := st.Names(sink.AreaReady); len(left) != 0 {
		t.Fatalf("segments left ready: %v", left)
	}
}
