package restorefaults

import (
	"fmt"
	"io"
	"sort"
)

// WriteMarkdown writes the report as a part of docs/RELIABILITY.md: with
// intro, the section's heading and what the enumeration does first.
func (r *Report) WriteMarkdown(w io.Writer, intro bool) {
	if intro {
		fmt.Fprintf(w, "## Restore-side fault enumeration\n\n")
		fmt.Fprintf(w, "The scenario (package internal/faults/restorefaults) restores three segments "+
			"with a record that does not decode, one the destination always refuses, a filtered pass (reason=failed) "+
			"whose unselected records stay in their segment, and the archive on; on a directory, plain, encrypted, through two restore jobs (their records faulted too) and with the filtered pass carving its records out of each segment into a side segment of their own (RunOptions.Carve), and on an S3 server. "+
			"A run without fault counts the calls of every Reader and record operation (the least of three runs: the "+
			"claim keeper's timer adds renewals on a slow machine); then each call fails without effect (fail), takes "+
			"effect and reports failure (lost), kills the process just before (crash) or after it (crash-after), or "+
			"pauses the process before (pause) or after it (pause-after) while a restorer without faults takes its "+
			"claims over and finishes the store, after which the paused one goes on; and each block boundary is "+
			"cancelled; restorers without faults then finish. Through the jobs, a pause, a cancel and a pause withdrawn by a resume "+
			"are also asked of the job running just before each write of a table and of a segment's record, the call made as usual (mark) or "+
			"with the runner paused there past its lease while another takes over (pause): each request must be acted on or refused, a withdrawn "+
			"pause never leave the job paused, no ended job hold a request, and nothing be delivered twice after a controlled stop. Invariants: every record delivered or quarantined, at "+
			"most one block of each segment in flight delivered twice per interruption (for each segment, the records of its largest block, a side segment's "+
			"blocks counted too, and at most SegmentsInFlight, 8, segments; the scenario's three segments are in flight at once, so up to three blocks), the quarantine holds exactly the undeliverable records, "+
			"nothing left in the store (no ready or staged segment: nothing a paused holder staged is ever published), "+
			"the originals archived, the metrics and Stats equal to what the destination and the quarantine hold.\n\n")
	}
	fmt.Fprintf(w, "### %s, %s\n\n", r.Store, r.Variant)
	fmt.Fprintf(w, "**%d runs: %d held, %d failed, %d not reached** (a point is not reached when its run made fewer calls "+
		"of the operation than the run without fault, the renewals depending on timing). At most %d records were "+
		"delivered twice in one run, of at most %d segments.\n\n", r.Runs, r.Held, len(r.Failed), r.Unexplored, r.MaxDuplicates, r.MaxSegments)
	modes := make([]string, 0, len(r.ByMode))
	for m := range r.ByMode {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	fmt.Fprintln(w, "| mode | held | runs |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for _, m := range modes {
		c := r.ByMode[m]
		fmt.Fprintf(w, "| %s | %d | %d |\n", m, c[1], c[0])
	}
	fmt.Fprintln(w, "\nCalls of each operation in the run without fault (each is a fault point in every mode):")
	fmt.Fprintln(w, "\n| operation | calls |")
	fmt.Fprintln(w, "| --- | --- |")
	for _, op := range r.Calls.Ops() {
		fmt.Fprintf(w, "| %s | %d |\n", op, r.Calls[op])
	}
	if len(r.Failed) > 0 {
		fmt.Fprintln(w, "\nRuns that failed:")
		fmt.Fprintln(w)
		for _, f := range r.Failed {
			fmt.Fprintf(w, "- %s\n", f)
		}
	}
	fmt.Fprintln(w)
}
