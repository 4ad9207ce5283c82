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
// writes of the jobs' and segments' records; on a directory, on gofakes3
// and on versitygw (skipped when there is none, see s3test.Versity).
// cmd/dlqdump-reliability (or
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
	dirs := func(*testing.T) restorefaults.Store {
		return restorefaults.DirStore(func() (string, error) { return os.MkdirTemp(base, "run-") })
	}
	fake := func(t *testing.T) restorefaults.Store {
		srv, stop, err := s3test.NewFake(nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return restorefaults.S3Store(srv)
	}
	versity := func(t *testing.T) restorefaults.Store {
		return restorefaults.S3Store(s3test.VersityFor(t, &s3test.Options{Bucket: "dlqdump-restorefaults"}))
	}
	full := os.Getenv("DLQDUMP_RESTORE_FAULTS_FULL") != ""
	// The sample on S3, and encrypted, is smaller: the first and last
	// call of each operation, and no cancellations; on gofakes3 and
	// encrypted, those failing in process only (what differs there is
	// the server and the read path; the handover of claims is plain's
	// and versitygw's).
	small := restorefaults.Selection{Modes: restorefaults.AllModes, Spread: -1}
	inProcess := restorefaults.Selection{Modes: []faults.Mode{faults.Fail, faults.Lost}, Spread: -1}
	for _, tc := range []struct {
		name    string
		store   func(*testing.T) restorefaults.Store
		variant restorefaults.Variant
		sel     restorefaults.Selection
	}{
		{"fs", dirs, restorefaults.Variant{}, restorefaults.CI},
		{"gofakes3", fake, restorefaults.Variant{}, inProcess},
		{"versitygw", versity, restorefaults.Variant{}, small},
		{"fs", dirs, restorefaults.Variant{Encrypted: true}, inProcess},
		// Jobs: and each request (pause, cancel, a pause withdrawn)
		// before the first and last write of a table and of a segment's
		// record, with the call made as usual and with the runner
		// paused there past its lease.
		{"fs", dirs, restorefaults.Variant{Jobs: true}, restorefaults.Selection{Modes: restorefaults.AllModes, Spread: -1, Controls: true}},
		// A replay of one record and a discard of two by their IDs
		// first: each call of theirs faulted too, the first and the
		// last (the calls between of the restore itself are plain's;
		// with one between it made 241 of the enumeration's 969
		// runs, issue 30).
		{"fs", dirs, restorefaults.Variant{Act: true}, restorefaults.Selection{Modes: restorefaults.AllModes, Spread: -1}},
		// The pass over reason=failed carves its records out of the
		// segments (RunOptions.Carve): each call of the carve (the
		// side segment's record, staging, publishing, the saves
		// around them) faulted, first and last.
		{"fs", dirs, restorefaults.Variant{Carve: true}, restorefaults.Selection{Modes: restorefaults.AllModes, Spread: -1}},
	} {
		t.Run(tc.name+"-"+tc.variant.String(), func(t *testing.T) {
			t.Parallel()
			store := tc.store(t)
			sel := tc.sel
			if full {
				sel = restorefaults.Every // every point, every block boundary
			}
			h := &restorefaults.Harness{Store: store, Variant: tc.variant, Child: child}
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
