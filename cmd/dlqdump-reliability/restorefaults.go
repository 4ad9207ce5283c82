package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/faults/restorefaults"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// restoreFaultsBlock names the block of docs/RELIABILITY.md the restore
// fault enumeration writes.
const restoreFaultsBlock = "restore-fault-enumeration"

// faultsRestore runs the restore side's fault enumeration (package
// restorefaults, the code TestFaultsRestore runs): every fault point, in
// every mode (pauses included), and every block boundary
// (restorefaults.Every), or a smoke sample with -short (restoreSmoke); on a directory, plain,
// encrypted and through restore jobs, and on versitygw (gofakes3 when there
// is none).
func faultsRestore(o *options) []result {
	start := time.Now()
	dirs, s3s, stop, err := restoreStores("dlqdump-restorefaults-")
	if err != nil {
		return []result{{section: "restore faults", figures: err.Error(), bound: "run"}}
	}
	defer stop()
	sel, which := restorefaults.Every, "every point and block boundary"
	if o.short {
		sel, which = restoreSmoke, "-short's smoke sample; TestFaultsRestore runs CI's"
	}
	var out []result
	var md bytes.Buffer
	for i, tc := range []struct {
		store   restorefaults.Store
		variant restorefaults.Variant
	}{
		{dirs, restorefaults.Variant{}},
		{dirs, restorefaults.Variant{Encrypted: true}},
		{dirs, restorefaults.Variant{Jobs: true}},
		{dirs, restorefaults.Variant{Carve: true}},
		{s3s, restorefaults.Variant{}},
	} {
		h := &restorefaults.Harness{Store: tc.store, Variant: tc.variant, Child: func() *exec.Cmd { return exec.Command(os.Args[0]) }}
		n := 0
		rep, err := h.Explore(context.Background(), sel, func(r *restorefaults.Result) {
			n++
			switch {
			case o.verbose || !r.Held() && !r.Unexplored():
				fmt.Fprintf(os.Stderr, "   %s\n", r)
			case n%50 == 0:
				fmt.Fprintf(os.Stderr, "   restore faults (%s, %s): %d runs so far\n", tc.store.Name(), tc.variant, n)
			}
		})
		section := fmt.Sprintf("restore faults (%s, %s)", tc.store.Name(), tc.variant)
		if err != nil {
			out = append(out, result{section: section, figures: "harness error: " + err.Error(), bound: "run"})
			continue
		}
		res := result{section: section,
			figures: fmt.Sprintf("%d runs (%s): %d held, %d failed, %d not reached (fewer calls); at most %d records delivered twice in a run, of %d segments",
				rep.Runs, which, rep.Held, len(rep.Failed), rep.Unexplored, rep.MaxDuplicates, rep.MaxSegments),
			bound: "every run held",
			ok:    len(rep.Failed) == 0,
		}
		if len(rep.Failed) > 0 {
			var what []string
			for _, f := range rep.Failed[:min(3, len(rep.Failed))] {
				what = append(what, f.String())
			}
			res.note = strings.Join(what, "; ")
		}
		out = append(out, res)
		rep.WriteMarkdown(&md, i == 0)
	}
	fmt.Fprintf(&md, "\nProduced by `go run ./cmd/dlqdump-reliability %s` on %s (%s, %d cores, %s) in %s.\n",
		strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), runtime.Version(), time.Since(start).Round(time.Second))
	o.blocks = append(o.blocks, block{name: restoreFaultsBlock, text: md.String()})
	return out
}

// restoreSmoke is what -short runs of the restore fault enumeration: the
// first and last call of each operation failing without effect, no
// cancellation. CI's deterministic samples run in TestFaultsRestore in the
// same CI run (scripts/test.sh), so -short only checks that this section and
// its stores (versitygw's among them) work.
var restoreSmoke = restorefaults.Selection{Modes: []faults.Mode{faults.Fail}, Spread: -1}

// restoreStores returns the stores the restore side's enumerations run on:
// directories under a temporary one named from prefix, and prefixes of a
// bucket on versitygw (gofakes3 when there is none); stop removes and
// stops them.
func restoreStores(prefix string) (dirs, s3s restorefaults.Store, stop func(), err error) {
	base, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	dirs = restorefaults.DirStore(func() (string, error) { return os.MkdirTemp(base, "run-") })
	srv, stopS3, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-reliability"})
	if err != nil {
		if srv, stopS3, err = s3test.NewFake(nil); err != nil {
			os.RemoveAll(base)
			return nil, nil, nil, err
		}
	}
	return dirs, restorefaults.S3Store(srv), func() { stopS3(); os.RemoveAll(base) }, nil
}
