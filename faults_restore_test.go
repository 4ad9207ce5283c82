package dlqdump_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/dlqdump/dlqdump/internal/faults/restorefaults"
)

func init() {
	children["faults-restore"] = restorefaults.ChildMain
}

// TestFaultsRestore enumerates the restore side's faults (see package
// restorefaults): CI's sample of the fault points, in process (failing
// without effect, taking effect and reporting failure) and in a child
// process (killed before or after the call), and every fourth block
// boundary cancelled. cmd/dlqdump-reliability (or
// DLQDUMP_RESTORE_FAULTS_FULL=1) runs every point and every boundary. One
// point alone:
//
//	DLQDUMP_RESTORE_FAULTS='Reader.WriteRecord#3/lost' go test -run TestFaultsRestore -v
func TestFaultsRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fault enumeration runs hundreds of restores")
	}
	base := t.TempDir()
	h := &restorefaults.Harness{
		TempDir: func() (string, error) { return os.MkdirTemp(base, "run-") },
		Child: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=faults-restore")
			return cmd
		},
	}
	sel := restorefaults.CI
	if os.Getenv("DLQDUMP_RESTORE_FAULTS_FULL") != "" {
		sel = restorefaults.Every // every point, every block boundary
	}
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
}
