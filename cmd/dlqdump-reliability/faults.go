package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/faults/dumpfaults"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// faultsBlock names the block of docs/RELIABILITY.md the fault enumeration
// writes.
const faultsBlock = "dump-fault-enumeration"

// faultsDump runs the dump side's fault enumeration (package dumpfaults, the
// same code TestFaultsDump runs): every fault point of every scenario, or
// a smoke sample with -short (dumpSmoke). Scenarios run two at a time. Each scenario is a
// line of the report; the per-operation tables and the violations go into a
// block of their own.
func faultsDump(o *options) []result {
	start := time.Now()
	srv, stop, err := s3test.NewFake(nil)
	if err != nil {
		return []result{{section: "dump faults", figures: err.Error(), bound: "run"}}
	}
	defer stop()
	base, err := os.MkdirTemp("", "dlqdump-faults-")
	if err != nil {
		return []result{{section: "dump faults", figures: err.Error(), bound: "run"}}
	}
	defer os.RemoveAll(base)
	h := &dumpfaults.Harness{
		S3:      srv,
		TempDir: func() (string, error) { return os.MkdirTemp(base, "run-") },
		Child:   func() *exec.Cmd { return exec.Command(os.Args[0]) },
	}
	sel, which := dumpfaults.Every, "every point"
	if o.short {
		sel, which = dumpSmoke, "-short's smoke sample; TestFaultsDump runs CI's"
	}
	scenarios := dumpfaults.Scenarios()
	reports := make([]*dumpfaults.ScenarioReport, len(scenarios))
	errs := make([]error, len(scenarios))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for i, sc := range scenarios {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var n int
			reports[i], errs[i] = h.Explore(context.Background(), sc, sel, func(r *dumpfaults.Result) {
				n++
				if o.verbose || len(r.Violations) > 0 {
					fmt.Fprintf(os.Stderr, "   %s: %d violations %v\n", r, len(r.Violations), r.Violations)
				} else if n%50 == 0 {
					fmt.Fprintf(os.Stderr, "   %s: %d points so far\n", sc.Name, n)
				}
			})
		})
	}
	wg.Wait()
	var rs []result
	var done []*dumpfaults.ScenarioReport
	for i, sc := range scenarios {
		name := "dump faults, " + sc.Name
		if errs[i] != nil {
			rs = append(rs, result{section: name, figures: "harness error: " + errs[i].Error(), bound: "run"})
			continue
		}
		r := reports[i]
		done = append(done, r)
		t := r.Total
		res := result{section: name,
			figures: fmt.Sprintf("%d fault points (%s; %d second faults): %d held, %d failed, %d not reached", t.Explored, which, r.Recovery.Explored, t.Held, t.Failed, t.NotReached),
			bound:   "every point held", ok: t.Failed == 0 && r.BaselineHeld()}
		if len(r.Failures) > 0 {
			res.note = "violations: " + violationKinds(r)
		}
		rs = append(rs, res)
	}
	var md bytes.Buffer
	dumpfaults.WriteMarkdown(&md, done, fmt.Sprintf("`go run ./cmd/dlqdump-reliability %s` on %s (%s, %d cores, %s) in %s",
		strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), runtime.Version(), time.Since(start).Round(time.Second)))
	o.blocks = append(o.blocks, block{name: faultsBlock, text: md.String()})
	return rs
}

// dumpSmoke is what -short runs of the dump fault enumeration: the first
// and last call of each operation failing without effect, in process. CI's
// deterministic sample (dumpfaults.CI) runs in TestFaultsDump in the same
// CI run (scripts/test.sh), so -short only checks that this section and its
// stores work.
var dumpSmoke = dumpfaults.Selection{Spread: 0, Modes: []faults.Mode{faults.Fail}}

// violationKinds lists the kinds of violation of a scenario with the number
// of points of each.
func violationKinds(r *dumpfaults.ScenarioReport) string {
	counts := map[string]int{}
	var kinds []string
	for _, res := range r.Failures {
		seen := map[string]bool{}
		for _, v := range res.Violations {
			if seen[v.Kind] {
				continue
			}
			seen[v.Kind] = true
			if counts[v.Kind] == 0 {
				kinds = append(kinds, v.Kind)
			}
			counts[v.Kind]++
		}
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s at %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
