package dumpfaults

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/dlqdump/dlqdump/internal/faults"
)

// Tally counts runs.
type Tally struct {
	// Explored is the number of points run.
	Explored int
	// Held is how many of them were reached and broke no invariant.
	Held int
	// Failed is how many broke an invariant.
	Failed int
	// NotReached is how many made fewer calls than the run without fault,
	// so that the fault never hit, and broke nothing.
	NotReached int
}

func (t *Tally) add(r *Result) {
	t.Explored++
	switch {
	case len(r.Violations) > 0:
		t.Failed++
	case r.Reached:
		t.Held++
	default:
		t.NotReached++
	}
}

// opMode is an operation in a mode: a row and column of the report.
type opMode struct {
	Op   faults.Op
	Mode faults.Mode
}

// ScenarioReport is what Explore found for one scenario.
type ScenarioReport struct {
	// Scenario is the scenario explored.
	Scenario Scenario
	// Counts are the calls of the run without fault.
	Counts faults.Counts
	// Baseline is the run without fault.
	Baseline *Result
	// Total counts every fault point, Recovery the runs with a second
	// fault in a call made after the first (counted in Total too).
	Total, Recovery Tally
	// Failures are the runs that broke an invariant, the run without
	// fault included.
	Failures []*Result

	byPoint, bySecond map[opMode]*Tally
}

func (r *ScenarioReport) add(res *Result) {
	if r.byPoint == nil {
		r.byPoint, r.bySecond = map[opMode]*Tally{}, map[opMode]*Tally{}
	}
	m := r.byPoint
	if res.First != nil {
		m = r.bySecond
		r.Recovery.add(res)
	}
	k := opMode{res.Point.Op, res.Point.Mode}
	if m[k] == nil {
		m[k] = &Tally{}
	}
	m[k].add(res)
	r.Total.add(res)
	if len(res.Violations) > 0 {
		r.Failures = append(r.Failures, res)
	}
}

// Tally returns the counts of one operation in one mode (first faults).
func (r *ScenarioReport) Tally(op faults.Op, m faults.Mode) Tally {
	if t := r.byPoint[opMode{op, m}]; t != nil {
		return *t
	}
	return Tally{}
}

// BaselineHeld reports whether the run without fault broke nothing.
func (r *ScenarioReport) BaselineHeld() bool {
	return r.Baseline != nil && len(r.Baseline.Violations) == 0
}

// Summary is one line: the scenario, the points explored and held.
func (r *ScenarioReport) Summary() string {
	s := fmt.Sprintf("%s: %d fault points explored (%d of them second faults), %d held, %d failed, %d not reached (%d calls without fault)",
		r.Scenario.Name, r.Total.Explored, r.Recovery.Explored, r.Total.Held, r.Total.Failed, r.Total.NotReached, r.Counts.Total())
	if !r.BaselineHeld() {
		s += "; the run WITHOUT fault failed"
	}
	return s
}

// modes returns the modes explored in m, in order.
func modes(m map[opMode]*Tally) []faults.Mode {
	var ms []faults.Mode
	for k := range m {
		if !slices.Contains(ms, k.Mode) {
			ms = append(ms, k.Mode)
		}
	}
	slices.Sort(ms)
	return ms
}

// WriteMarkdown writes the reports as a section of docs/RELIABILITY.md: the
// totals, a table per scenario (held/explored per operation and mode) and
// the violations found, grouped by kind. producedBy says how the reports
// were made (a command, a date, a machine).
func WriteMarkdown(w io.Writer, reps []*ScenarioReport, producedBy string) {
	var total Tally
	for _, r := range reps {
		total.Explored += r.Total.Explored
		total.Held += r.Total.Held
		total.Failed += r.Total.Failed
		total.NotReached += r.Total.NotReached
	}
	fmt.Fprintf(w, "## Dump-side fault enumeration\n\n")
	fmt.Fprintf(w, "Produced by %s. Each scenario dumps a fixed set of records through a Queue; a run without fault counts the calls of every sink operation and S3 request, then the scenario runs again once per fault point: the K-th call of an operation fails without effect (fail), takes effect and reports failure (lost), hangs until Shutdown's deadline has passed, before or after taking effect (stall, stall-after; in a child process that exits after Shutdown), or the process is SIGKILLed just before (crash) or just after (crash-after) it. After each fail or lost point that held, a second fault hits each call the first one caused (the retry, the Truncate before it, the HeadObject checking a lost PUT, the abort of a failed upload), failing both ways. After each run a Queue is opened again on the same store and the invariants of internal/faults/dumpfaults are checked: every acknowledged record stored (after a buffered crash: those a successful Flush or Close covered), none twice, none that Enqueue refused, no temporary file, spool file or multipart upload left, Close nil only once stored, every error's count true.\n\n", producedBy)
	var second int
	for _, r := range reps {
		second += r.Recovery.Explored
	}
	fmt.Fprintf(w, "**%d fault points explored (%d of them second faults): %d held, %d failed, %d not reached.**\n\n", total.Explored, second, total.Held, total.Failed, total.NotReached)
	fmt.Fprintln(w, "| scenario | points | second faults | held | failed | not reached | run without fault |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range reps {
		base := "ok"
		if !r.BaselineHeld() {
			base = "FAILED"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %s |\n", r.Scenario.Name, r.Total.Explored, r.Recovery.Explored, r.Total.Held, r.Total.Failed, r.Total.NotReached, base)
	}
	for _, r := range reps {
		fmt.Fprintf(w, "\n### %s\n\nHeld/explored per operation and mode (calls: in the run without fault).\n\n", r.Scenario.Name)
		writeTally(w, r.byPoint, r.Counts.Ops(), r.Counts)
		if r.Recovery.Explored > 0 {
			fmt.Fprintf(w, "\nSecond faults, after each fail or lost point that held: held/explored per operation and mode of the second.\n\n")
			var ops []faults.Op
			for k := range r.bySecond {
				if !slices.Contains(ops, k.Op) {
					ops = append(ops, k.Op)
				}
			}
			slices.Sort(ops)
			writeTally(w, r.bySecond, ops, nil)
		}
		writeFailures(w, r)
	}
}

// writeTally writes a table of held/explored per operation and mode, with
// the calls of the run without fault when calls is not nil.
func writeTally(w io.Writer, m map[opMode]*Tally, ops []faults.Op, calls faults.Counts) {
	ms := modes(m)
	fmt.Fprintf(w, "| operation |")
	if calls != nil {
		fmt.Fprintf(w, " calls |")
	}
	for _, mode := range ms {
		fmt.Fprintf(w, " %s |", mode)
	}
	cols := len(ms) + 1
	if calls != nil {
		cols++
	}
	fmt.Fprintf(w, "\n|%s\n", strings.Repeat(" --- |", cols))
	for _, op := range ops {
		fmt.Fprintf(w, "| %s |", op)
		if calls != nil {
			fmt.Fprintf(w, " %d |", calls[op])
		}
		for _, mode := range ms {
			t := m[opMode{op, mode}]
			if t == nil {
				t = &Tally{}
			}
			cell := fmt.Sprintf("%d/%d", t.Held, t.Explored)
			if t.Failed > 0 {
				cell = fmt.Sprintf("**%s**", cell)
			}
			fmt.Fprintf(w, " %s |", cell)
		}
		fmt.Fprintln(w)
	}
}

// writeFailures lists the violations of a scenario by kind, each with the
// number of points and up to three of them with the first detail.
func writeFailures(w io.Writer, r *ScenarioReport) {
	if len(r.Failures) == 0 {
		return
	}
	type group struct {
		points []string
		detail string
	}
	groups := map[string]*group{}
	for _, res := range r.Failures {
		for _, v := range res.Violations {
			g := groups[v.Kind]
			if g == nil {
				g = &group{detail: v.Detail}
				groups[v.Kind] = g
			}
			name := "no fault"
			switch {
			case res.First != nil:
				name = res.First.String() + " then " + res.Point.String()
			case res.Point != nil:
				name = res.Point.String()
			}
			if !slices.Contains(g.points, name) {
				g.points = append(g.points, name)
			}
		}
	}
	kinds := make([]string, 0, len(groups))
	for k := range groups {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "\nViolations:\n\n")
	for _, k := range kinds {
		g := groups[k]
		shown := g.points
		if len(shown) > 3 {
			shown = shown[:3]
		}
		fmt.Fprintf(w, "- **%s** at %d points (e.g. %s): %s\n", k, len(g.points), strings.Join(shown, ", "), mdEscape(g.detail))
	}
}

func mdEscape(s string) string {
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
