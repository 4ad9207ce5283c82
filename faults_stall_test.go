package dlqdump_test

import (
	"os"
	"testing"

	"github.com/dlqdump/dlqdump/internal/faults/restorefaults"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// TestFaultsStalls pauses each holder that finishes a segment on behalf of
// its claim (a restorer deleting, archiving, quarantining it, applying its
// VersionPolicy; a prune expiring it) past its lease between its fencing
// write and its effect, while a restorer takes its claims over (package
// restorefaults, RunStalls), going on when the taker has drained the store,
// as it first opens the segment the holder was finishing, or as it deletes
// or moves it: CI's deterministic sample, the first and last effect of each
// holder paused before it, on a directory and (the first only) on gofakes3.
// A carving pass (holder "carve") is paused as it publishes a carved side
// segment and as it finishes one.
// cmd/dlqdump-reliability (or DLQDUMP_STALLS_FULL=1) pauses before and
// after every effect, on versitygw too. Before issue 30's fix, 7 of the 36
// runs on a directory failed: a prune's late delete lost what the taker
// took over uncounted, a late move to quarantine kept a copy of what the
// taker delivered.
func TestFaultsStalls(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the stall enumeration runs dozens of restores with leases to wait for")
	}
	t.Parallel()
	base := t.TempDir()
	dirs := restorefaults.DirStore(func() (string, error) { return os.MkdirTemp(base, "run-") })
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop) // after the parallel subtests
	full := os.Getenv("DLQDUMP_STALLS_FULL") != ""
	for _, tc := range []struct {
		store restorefaults.Store
		sel   restorefaults.StallSelection
	}{
		{dirs, restorefaults.StallsCI},
		// On S3 the first effect of each holder only, the holder going
		// on as the taker touches its segment.
		{restorefaults.S3Store(srv), restorefaults.StallSelection{Modes: restorefaults.StallsCI.Modes, Ends: true, First: true,
			Resumes: []restorefaults.Resume{restorefaults.ResumeAtOpen, restorefaults.ResumeAtEffect}}},
	} {
		t.Run(tc.store.Name(), func(t *testing.T) {
			t.Parallel()
			sel := tc.sel
			if full {
				sel = restorefaults.StallsEvery
			}
			h := &restorefaults.StallHarness{Store: tc.store}
			rep, err := h.RunStalls(t.Context(), sel, func(r *restorefaults.Result) {
				if !r.Held() && !r.Unexplored() {
					t.Errorf("%s", r)
				} else if testing.Verbose() {
					t.Logf("%s", r)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("stall enumeration: %s", rep.Summary())
			if runs, _ := rep.Total(); runs == 0 {
				t.Fatal("no stall point reached")
			}
		})
	}
}
