package dlqdump_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

func init() {
	children["drainer"] = drainers.ChildMain
}

// manySegments is how many segments TestRestorersShareAStore drains:
// DLQDUMP_MANY_SEGMENTS, CI's sample, or with DLQDUMP_FULL=1 (or
// DLQDUMP_MANY_FULL=1, cmd/dlqdump-reliability's "full tests") the larger
// size the test ran before.
func manySegments(sample, full int) int {
	if n, err := strconv.Atoi(os.Getenv("DLQDUMP_MANY_SEGMENTS")); err == nil && n > 0 {
		return n
	}
	if fullRun("MANY") {
		return full
	}
	return sample
}

// Several restorer processes with the same Owner drain one store: every
// record is delivered exactly once while all of them live (package
// drainers, which cmd/dlqdump-reliability runs on 10,000 segments).
// DLQDUMP_MANY_SEGMENTS=10000 runs the full size here.
func TestRestorersShareAStore(t *testing.T) {
	t.Parallel()
	const procs, per = 4, 5
	for _, store := range []string{"dir", "versitygw"} {
		t.Run(store, func(t *testing.T) {
			st := drainers.Store{Dir: t.TempDir()}
			n := manySegments(400, 1000)
			if store == "versitygw" {
				srv, stop, err := s3test.Versity(nil)
				if err != nil {
					t.Skip(err)
				}
				t.Cleanup(stop)
				st = drainers.Store{S3: srv, Prefix: s3test.UniquePrefix("many")}
				n = manySegments(150, 300)
			}
			res, err := drainers.Run(t.Context(), st, n, per, procs, func() *exec.Cmd {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=drainer")
				return cmd
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				t.Fatalf("%s: %s; %d items delivered that were never dumped", store, res, res.Foreign)
			}
			t.Logf("%s: %s", store, res)
		})
	}
}
