package dumpfaults

import (
	"context"
	"fmt"

	"github.com/dlqdump/dlqdump/internal/faults"
)

// Selection says which fault points Explore runs.
type Selection struct {
	// Spread chooses the K of the in-process points (Modes): negative for
	// every K up to the operation's count; otherwise the first and last
	// call and Spread more spread evenly between (faults.Sample).
	Spread int
	// Modes are the in-process modes: faults.Fail and faults.Lost.
	Modes []faults.Mode
	// ChildSpread and ChildModes are the same for the points run in a
	// child process: faults.Crash, faults.CrashAfter and faults.Stall.
	ChildSpread int
	ChildModes  []faults.Mode
	// Match, when set, keeps only the points for which it returns true.
	Match func(faults.Point) bool
}

// Every is the full enumeration: every K of every operation, in every mode.
var Every = Selection{
	Spread: -1, Modes: []faults.Mode{faults.Fail, faults.Lost},
	ChildSpread: -1, ChildModes: []faults.Mode{faults.Crash, faults.CrashAfter, faults.Stall},
}

// CI is the deterministic sample the tests run: for every operation of
// every scenario its first and last call and two between, failing without
// effect and with effect; and its first and last call killing the process
// before and after it and hanging past Shutdown's deadline.
var CI = Selection{
	Spread: 2, Modes: []faults.Mode{faults.Fail, faults.Lost},
	ChildSpread: 0, ChildModes: []faults.Mode{faults.Crash, faults.CrashAfter, faults.Stall},
}

// Points returns the points of sel for the calls counted in a run without
// fault. Writer.Recover is not stalled: NewQueue has no context to bound it.
func (sel Selection) Points(c faults.Counts) []faults.Point {
	pick := func(spread int, modes []faults.Mode) []faults.Point {
		if len(modes) == 0 {
			return nil
		}
		if spread < 0 {
			return faults.All(c, modes...)
		}
		return faults.Sample(c, spread, modes...)
	}
	var out []faults.Point
	for _, p := range append(pick(sel.Spread, sel.Modes), pick(sel.ChildSpread, sel.ChildModes)...) {
		if p.Mode == faults.Stall && p.Op == faults.OpRecover {
			continue
		}
		if sel.Match == nil || sel.Match(p) {
			out = append(out, p)
		}
	}
	return out
}

// Explore runs sc once without fault, counting the calls, then once for
// every point sel derives from the counts, handing each result to each (when
// not nil) as it comes, and returns the scenario's report. It stops early
// only when ctx is done or the harness itself fails.
func (h *Harness) Explore(ctx context.Context, sc Scenario, sel Selection, each func(*Result)) (*ScenarioReport, error) {
	base, err := h.Run(ctx, sc, nil)
	if err != nil {
		return nil, fmt.Errorf("dumpfaults: %s without fault: %w", sc.Name, err)
	}
	rep := &ScenarioReport{Scenario: sc, Counts: base.Counts, Baseline: base}
	if each != nil {
		each(base)
	}
	for _, p := range sel.Points(base.Counts) {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		res, err := h.Run(ctx, sc, &p)
		if err != nil {
			return rep, fmt.Errorf("dumpfaults: %s at %s: %w", sc.Name, p, err)
		}
		rep.add(res)
		if each != nil {
			each(res)
		}
	}
	return rep, nil
}
