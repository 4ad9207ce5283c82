package dlqdump_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/faults/restorefaults"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

func init() {
	children["faults-restore"] = restorefaults.ChildMain
}

// TestFaultsRestore enumerates the restore side's faults (see package
// restorefaults): CI's sample of the fault points, in process (failing
// without effect, taking effect and reporting failure) and in a child
// process (killed before or after the call), every fourth block boundary
// cancelled, and, through restore jobs, requests interleaved with the
// writes of the jobs' and segments' records. cmd/dlqdump-reliability (or
// DLQDUMP_RESTORE_FAULTS_FULL=1) runs every point and every boundary. One
// point alone:
//
//	DLQDUMP_RESTORE_FAULTS='Reader.WriteRecord#3/lost' go test -run TestFaultsRestore -v
func TestFaultsRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fault enumeration runs hundreds of restores")
	}
	t.Parallel()
	base := t.TempDir()
	child := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=faults-restore")
		return cmd
	}
	dirs := restorefaults.DirStore(func() (string, error) { return os.MkdirTemp(base, "run-") })
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop) // after the parallel subtests
	full := os.Getenv("DLQDUMP_RESTORE_FAULTS_FULL") != ""
	for _, tc := range []struct {
		store   restorefaults.Store
		variant restorefaults.Variant
		sel     restorefaults.Selection
	}{
		{dirs, restorefaults.Variant{}, restorefaults.CI},
		// The sample on S3 is smaller: the first and last call of each
		// operation, and no cancellations; encrypted, those failing in
		// process only (decryption is on the read path; the handover
		// of claims is plain's).
		{restorefaults.S3Store(srv), restorefaults.Variant{}, restorefaults.Selection{Modes: restorefaults.AllModes, Spread: -1}},
		{dirs, restorefaults.Variant{Encrypted: true}, restorefaults.Selection{Modes: []faults.Mode{faults.Fail, faults.Lost}, Spread: -1}},
		// Jobs: and each request (pause, cancel, a pause withdrawn)
		// before the first and last write of a table and of a segment's
		// record, with the call made as usual and with the runner
		// paused there past its lease.
		{dirs, restorefaults.Variant{Jobs: true}, restorefaults.Selection{Modes: restorefaults.AllModes, Spread: -1, Controls: true}},
	} {
		t.Run(tc.store.Name()+"-"+tc.variant.String(), func(t *testing.T) {
			t.Parallel()
			sel := tc.sel
			if full {
				sel = restorefaults.Every // every point, every block boundary
			}
			h := &restorefaults.Harness{Store: tc.store, Variant: tc.variant, Child: child}
			rep, err := h.Explore(t.Context(), sel, func(r *restorefaults.Result) {
				if !r.Held() && !r.Unexplored() {
					t.Errorf("%s", r)
				} else if testing.Verbose() {
					t.Logf("%s", r)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("restore fault enumeration: calls without fault %v", rep.Calls)
			t.Logf("restore fault enumeration: %s", rep.Summary())
		})
	}
}
