package restorefaults

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/dlqdump/dlqdump/internal/faults"
)

// EnvOnly names one point to run alone (as faults.ParsePoint reads it),
// "cancel@N" for one cancellation, or "REQUEST@before:POINT" for one control
// run ("pause+resume@before:Table.WriteRecord#7/mark").
const EnvOnly = "DLQDUMP_RESTORE_FAULTS"

// Selection says which runs Explore makes.
type Selection struct {
	// Modes are the fault modes to try at each point.
	Modes []faults.Mode
	// Spread, when positive, samples each operation's calls: the first,
	// the last and Spread more between them (faults.Sample); negative
	// takes the first and the last only; 0 tries every call.
	Spread int
	// Cancels runs the scenario cancelled after each block's deliveries
	// (every Cancels-th block boundary; 1 for all, 0 for none).
	Cancels int
	// Controls, in the jobs variant, interleaves each request (Controls)
	// with the calls of ControlOps, sampled as Spread says, each call
	// made as usual and with the runner paused there (see Control).
	Controls bool
}

// The selections TestFaultsRestore and cmd/dlqdump-reliability run.
var (
	// CI is the sample the tests run: for each operation its first, last
	// and one more call, each failing without effect, taking effect and
	// reporting failure, killing the process before and after it, and
	// pausing it past its lease before and after it; and every fourth
	// block boundary cancelled.
	CI = Selection{Modes: AllModes, Spread: 1, Cancels: 4, Controls: true}
	// Every is the full enumeration: every call of every operation in
	// those six modes, every block boundary cancelled, and, in the jobs
	// variant, every request before every call of ControlOps.
	Every = Selection{Modes: AllModes, Spread: 0, Cancels: 1, Controls: true}
	// AllModes are the modes of a fault point.
	AllModes = []faults.Mode{faults.Fail, faults.Lost, faults.Crash, faults.CrashAfter, faults.Pause, faults.PauseAfter}
)

// Report counts what Explore ran.
type Report struct {
	// Store and Variant name what the runs restored from: "fs plain",
	// "gofakes3 encrypted".
	Store, Variant string
	// Calls are the calls of each operation in the run without fault.
	Calls faults.Counts
	// Runs and Held count the runs made and those where every invariant
	// held; ByMode splits them by mode ("cancel" for cancellations).
	Runs, Held int
	ByMode     map[string][2]int
	// Failed are the runs that broke an invariant or did not reach their
	// point although they made enough calls of its operation.
	Failed []*Result
	// Unexplored counts the points not reached because the run made fewer
	// calls of their operation than the run without fault (see
	// Result.Fewer); they are in Runs, not in Held nor Failed.
	Unexplored int
	// MaxDuplicates is the most records delivered twice in one run, and
	// MaxSegments the most segments they were of.
	MaxDuplicates, MaxSegments int
}

// Explore runs the scenario without fault, then with each selected fault
// point and cancellation, calling each with every result.
func (h *Harness) Explore(ctx context.Context, sel Selection, each func(*Result)) (*Report, error) {
	calls, base, boundaries, err := h.count(ctx)
	if err != nil {
		return nil, err
	}
	rep := &Report{Calls: calls, ByMode: map[string][2]int{}, Store: h.Store.Name(), Variant: h.Variant.String()}
	add := func(mode string, r *Result) {
		rep.Runs++
		c := rep.ByMode[mode]
		c[0]++
		switch {
		case r.Held():
			rep.Held++
			c[1]++
		case r.Unexplored():
			rep.Unexplored++
		default:
			rep.Failed = append(rep.Failed, r)
		}
		rep.ByMode[mode] = c
		rep.MaxDuplicates = max(rep.MaxDuplicates, r.Duplicates)
		rep.MaxSegments = max(rep.MaxSegments, r.Segments)
		if each != nil {
			each(r)
		}
	}
	add("none", base)
	if only := os.Getenv(EnvOnly); only != "" {
		return rep, h.only(ctx, only, add)
	}
	var points []faults.Point
	if sel.Spread != 0 {
		points = faults.Sample(calls, max(sel.Spread, 0), sel.Modes...)
	} else {
		points = faults.All(calls, sel.Modes...)
	}
	for _, p := range points {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		r, err := h.Run(ctx, p)
		if err != nil {
			return rep, err
		}
		add(p.Mode.String(), r)
	}
	if n := len(boundaries); n > 0 {
		boundaries = boundaries[:n-1] // after the last delivery there is nothing to cancel
	}
	for i := 0; sel.Cancels > 0 && i < len(boundaries); i += sel.Cancels {
		r, err := h.Cancel(ctx, boundaries[i])
		if err != nil {
			return rep, err
		}
		add("cancel", r)
	}
	if sel.Controls && h.Variant.Jobs {
		for _, p := range controlPoints(calls, sel.Spread) {
			for _, ctl := range Controls {
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				r, err := h.Control(ctx, p, ctl)
				if err != nil {
					return rep, err
				}
				add(string(ctl)+" at "+p.Mode.String(), r)
			}
		}
	}
	return rep, nil
}

// controlPoints returns the calls of ControlOps requests are interleaved
// with, sampled as spread says (see Selection.Spread), in controlModes.
func controlPoints(calls faults.Counts, spread int) []faults.Point {
	ops := faults.Counts{}
	for _, op := range ControlOps {
		ops[op] = calls[op]
	}
	if spread != 0 {
		return faults.Sample(ops, max(spread, 0), controlModes...)
	}
	return faults.All(ops, controlModes...)
}

func (h *Harness) only(ctx context.Context, only string, add func(string, *Result)) error {
	if ctl, pt, ok := strings.Cut(only, "@before:"); ok {
		p, err := faults.ParsePoint(pt)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvOnly, err)
		}
		r, err := h.Control(ctx, p, Control(ctl))
		if err != nil {
			return err
		}
		add(ctl+" at "+p.Mode.String(), r)
		return nil
	}
	if n, ok := strings.CutPrefix(only, "cancel@"); ok {
		var k int
		if _, err := fmt.Sscan(n, &k); err != nil {
			return fmt.Errorf("%s=%q: %w", EnvOnly, only, err)
		}
		r, err := h.Cancel(ctx, k)
		if err != nil {
			return err
		}
		add("cancel", r)
		return nil
	}
	p, err := faults.ParsePoint(only)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvOnly, err)
	}
	r, err := h.Run(ctx, p)
	if err != nil {
		return err
	}
	add(p.Mode.String(), r)
	return nil
}

// countRuns is how many runs without fault count the calls: each
// operation's count is the least of them, the calls every run makes, without
// the renewals a slow run adds on its timer.
const countRuns = 3

// count runs without fault and returns the calls (the least of countRuns
// runs), the result of the first run (or the first that broke an
// invariant) and the number of deliveries at the end of each block.
func (h *Harness) count(ctx context.Context) (faults.Counts, *Result, []int, error) {
	var calls faults.Counts
	var res *Result
	var boundaries []int
	for i := range countRuns {
		c, r, err := h.Count(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		if i == 0 {
			calls, res, boundaries = c, r, h.boundaries
			continue
		}
		if !r.Held() && res.Held() {
			res = r
		}
		for op, n := range calls {
			calls[op] = min(n, c[op])
		}
	}
	return calls, res, boundaries, nil
}

// Summary is one line per mode, for logs and the report.
func (r *Report) Summary() string {
	modes := make([]string, 0, len(r.ByMode))
	for m := range r.ByMode {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s: %d runs, %d held, %d failed, %d not reached (the run made fewer calls)", r.Store, r.Variant, r.Runs, r.Held, len(r.Failed), r.Unexplored)
	for _, m := range modes {
		c := r.ByMode[m]
		fmt.Fprintf(&b, "; %s %d/%d", m, c[1], c[0])
	}
	fmt.Fprintf(&b, "; at most %d records delivered twice in a run, of %d segments", r.MaxDuplicates, r.MaxSegments)
	return b.String()
}
