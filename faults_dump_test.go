package dlqdump_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/faults/dumpfaults"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

func init() {
	children["faults-dump"] = dumpfaults.ChildMain
}

// faultsHarness returns a harness whose runs get directories under t's
// temporary directory, whose S3 scenarios use an in-process gofakes3, and
// whose child processes are this test binary.
func faultsHarness(t *testing.T) *dumpfaults.Harness {
	t.Helper()
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	base := t.TempDir()
	return &dumpfaults.Harness{
		S3:      srv,
		TempDir: func() (string, error) { return os.MkdirTemp(base, "run-") },
		Child: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=faults-dump")
			return cmd
		},
	}
}

// TestFaultsDump enumerates the dump side's faults over every scenario (see
// package dumpfaults): CI's sample of the points, or what DLQDUMP_FAULTS
// says (see faultsSelection), e.g. to run one point:
//
//	DLQDUMP_FAULTS='fs/durable@Segment.Sync#3/lost' go test -run TestFaultsDump -v
//
// DLQDUMP_FAULTS_TRACE=1 logs every run.
// Each violated invariant fails the test, naming the point. The log ends
// with the count of points explored and held.
func TestFaultsDump(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the fault enumeration runs hundreds of dumps")
	}
	t.Parallel()
	h := faultsHarness(t)
	sel, only, err := faultsSelection(os.Getenv("DLQDUMP_FAULTS"))
	if err != nil {
		t.Fatal(err)
	}
	trace := os.Getenv("DLQDUMP_FAULTS_TRACE") != ""
	var mu sync.Mutex
	var reports []*dumpfaults.ScenarioReport
	t.Run("group", func(t *testing.T) {
		for _, sc := range dumpfaults.Scenarios() {
			if only != "" && sc.Name != only {
				continue
			}
			t.Run(strings.ReplaceAll(sc.Name, "/", "-"), func(t *testing.T) {
				t.Parallel()
				rep, err := h.Explore(context.Background(), sc, sel, func(r *dumpfaults.Result) {
					if trace {
						t.Logf("%s: reached %v, %d violations", r, r.Reached, len(r.Violations))
					}
					for _, v := range r.Violations {
						t.Errorf("%s: %s\n\tQueue's answers: %s", r, v, tail(r.Lines, 4))
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Log(rep.Summary())
				mu.Lock()
				reports = append(reports, rep)
				mu.Unlock()
			})
		}
	})
	var explored, second, held, failed, unreached int
	for _, r := range reports {
		explored += r.Total.Explored
		second += r.Recovery.Explored
		held += r.Total.Held
		failed += r.Total.Failed
		unreached += r.Total.NotReached
	}
	t.Logf("fault enumeration: %d scenarios, %d fault points explored (%d of them second faults), %d held, %d failed, %d not reached",
		len(reports), explored, second, held, failed, unreached)
}

// faultsSelection reads DLQDUMP_FAULTS: empty for CI's sample of every
// scenario, "all" for every point of every scenario, "SCENARIO" for CI's
// sample of one, "SCENARIO@all" for every point of one, "SCENARIO@POINT"
// for one point, "SCENARIO@FIRST,SECOND" for a second fault after a first
// (as the log names it: "at FIRST then SECOND").
func faultsSelection(v string) (sel dumpfaults.Selection, only string, err error) {
	if v == "" {
		return dumpfaults.CI, "", nil
	}
	if v == "all" {
		return dumpfaults.Every, "", nil
	}
	only, ps, ok := strings.Cut(v, "@")
	switch {
	case !ok:
		return dumpfaults.CI, only, nil
	case ps == "all":
		return dumpfaults.Every, only, nil
	}
	var points []faults.Point
	for _, s := range strings.Split(ps, ",") {
		p, err := faults.ParsePoint(s)
		if err != nil {
			return sel, "", fmt.Errorf("DLQDUMP_FAULTS=%s: want all, SCENARIO, SCENARIO@all, SCENARIO@POINT or SCENARIO@FIRST,SECOND: %w", v, err)
		}
		points = append(points, p)
	}
	sel = dumpfaults.Every
	sel.Match = func(q faults.Point) bool { return slices.Contains(points, q) }
	return sel, only, nil
}

// tail returns the last n lines, joined.
func tail(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("%q", lines)
}
