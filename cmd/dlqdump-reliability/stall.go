package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/internal/faults/restorefaults"
)

// stallBlock names the block of docs/RELIABILITY.md the stall enumeration
// writes.
const stallBlock = "restore-stall-enumeration"

// stalls runs the stall enumeration (restorefaults.RunStalls, the code
// TestFaultsStalls runs): each holder that finishes a segment on behalf of
// its claim paused past its lease before and after every delete or move it
// makes, going on when the restorer taking over has drained the store, as
// it opens the segment, or as it deletes or moves it (restorefaults.
// StallsEvery), or a smoke sample with -short (stallSmoke); on a directory and on
// versitygw (gofakes3 when there is none).
// stallSmoke is what -short runs of the stall enumeration: the first effect
// of each holder paused before it, going on as the taker opens the segment.
// CI's deterministic sample (restorefaults.StallsCI) runs in
// TestFaultsStalls in the same CI run (scripts/test.sh), so -short only
// checks that this section and its stores work.
var stallSmoke = restorefaults.StallSelection{Modes: []faults.Mode{faults.Pause}, Ends: true, First: true,
	Resumes: []restorefaults.Resume{restorefaults.ResumeAtOpen}}

func stalls(o *options) []result {
	start := time.Now()
	dirs, s3s, stop, err := restoreStores("dlqdump-stalls-")
	if err != nil {
		return []result{{section: "stall enumeration", figures: err.Error(), bound: "run"}}
	}
	defer stop()
	sel, which := restorefaults.StallsEvery, "every delete and move, paused before and after"
	if o.short {
		sel, which = stallSmoke, "-short's smoke sample; TestFaultsStalls runs CI's"
	}
	var out []result
	var md bytes.Buffer
	fmt.Fprintf(&md, "## Holders stalled between their fencing write and its effect\n\n"+
		"Each holder that finishes a segment on behalf of its claim (package internal/faults/restorefaults, RunStalls): "+
		"a restorer deleting (restore-delete), archiving (restore-archive) or quarantining a segment with a damaged block "+
		"(quarantine-damaged), one of another version quarantining (quarantine-version) or deleting (delete-version) "+
		"segments of version 1 by its VersionPolicy, and a prune expiring them (prune), three segments each, is paused "+
		"past its lease before (pause) or after (pause-after) its k-th delete or move, for every k, while a version-1 "+
		"restorer takes its claims over; it goes on when that restorer has drained the store, as it first opens the "+
		"segment the holder was finishing, or as it deletes or moves it. Then restorers finish the store, release the "+
		"quarantine and restore it. Invariants: no record delivered twice but one block of the holder's next segment "+
		"(its checkpoint held by the pause), every intact record delivered or its segment expired (counted once) or "+
		"deleted by the policy, the records released from quarantine counted once as quarantined, nothing left in the "+
		"store. Before issue 30's fix, 7 of CI's 36 runs on a directory failed.\n\n")
	for _, st := range []restorefaults.Store{dirs, s3s} {
		h := &restorefaults.StallHarness{Store: st}
		n := 0
		rep, err := h.RunStalls(context.Background(), sel, func(r *restorefaults.Result) {
			n++
			switch {
			case o.verbose || !r.Held() && !r.Unexplored():
				fmt.Fprintf(os.Stderr, "   %s\n", r)
			case n%50 == 0:
				fmt.Fprintf(os.Stderr, "   stalls (%s): %d runs so far\n", st.Name(), n)
			}
		})
		section := fmt.Sprintf("stall enumeration (%s)", st.Name())
		if err != nil {
			out = append(out, result{section: section, figures: "harness error: " + err.Error(), bound: "run"})
			continue
		}
		runs, held := rep.Total()
		res := result{section: section,
			figures: fmt.Sprintf("%d stall points (%s): %d held, %d failed, %d not reached", runs, which, held, len(rep.Failed), rep.Unreached),
			bound:   "every stall point held",
			ok:      len(rep.Failed) == 0 && runs > 0,
		}
		if len(rep.Failed) > 0 {
			var what []string
			for _, f := range rep.Failed[:min(3, len(rep.Failed))] {
				what = append(what, f.String())
			}
			res.note = strings.Join(what, "; ")
		}
		out = append(out, res)
		fmt.Fprintf(&md, "- %s\n", rep.Summary())
		for _, f := range rep.Failed {
			fmt.Fprintf(&md, "  - failed: %s\n", f)
		}
	}
	fmt.Fprintf(&md, "\nProduced by `go run ./cmd/dlqdump-reliability %s` on %s (%s, %d cores, %s) in %s.\n",
		strings.Join(os.Args[1:], " "), time.Now().UTC().Format("2006-01-02"), cpuModel(), runtime.NumCPU(), runtime.Version(), time.Since(start).Round(time.Second))
	o.blocks = append(o.blocks, block{name: stallBlock, text: md.String()})
	return out
}
