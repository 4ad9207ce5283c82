package dumpfaults

import (
	"context"
	"fmt"
	"slices"

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
	// child process: faults.Crash, faults.CrashAfter, faults.Stall and
	// faults.StallAfter.
	// ChildLast keeps only each operation's last call.
	ChildSpread int
	ChildModes  []faults.Mode
	ChildLast   bool
	// RecoveryModes, when set, adds second faults: after each in-process
	// point that held, the calls the fault caused are faulted in each of
	// these modes, on top of the first fault. Those are, for each
	// operation the run called more often than the run without fault, its
	// first call after the fault (the retry of the failed call, say); and
	// the calls of operations the run without fault never makes (the
	// Truncate before a retried write, the HeadObject that checks a lost
	// PUT, the abort of a failed upload), chosen by RecoverySpread as
	// Spread chooses.
	RecoverySpread int
	RecoveryModes  []faults.Mode
	// RecoveryAfter, when set, limits second faults to first faults in
	// these modes.
	RecoveryAfter []faults.Mode
	// Match, when set, keeps only the points for which it returns true
	// (for second faults: the second point).
	Match func(faults.Point) bool
}

// Every is the full enumeration: every K of every operation, in every mode.
var Every = Selection{
	Spread: -1, Modes: []faults.Mode{faults.Fail, faults.Lost},
	ChildSpread: -1, ChildModes: []faults.Mode{faults.Crash, faults.CrashAfter, faults.Stall, faults.StallAfter},
	RecoverySpread: -1, RecoveryModes: []faults.Mode{faults.Fail, faults.Lost},
}

// CI is the deterministic sample the tests run: for every operation of
// every scenario its first and last call failing without effect and with
// effect (the calls between them: Every, which cmd/dlqdump-reliability
// runs); its last call killing the process before and after it
// and hanging past Shutdown's deadline (before and after taking effect);
// and after each of the first that took effect (lost), the calls it caused
// failing both ways (of an operation the run without fault never makes, the
// first and last call).
var CI = Selection{
	Spread: 0, Modes: []faults.Mode{faults.Fail, faults.Lost},
	ChildSpread: 0, ChildModes: []faults.Mode{faults.Crash, faults.CrashAfter, faults.Stall, faults.StallAfter}, ChildLast: true,
	RecoverySpread: 0, RecoveryModes: []faults.Mode{faults.Fail, faults.Lost}, RecoveryAfter: []faults.Mode{faults.Lost},
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
		if p.Mode.Stalls() && p.Op == faults.OpRecover {
			continue
		}
		if sel.ChildLast && (p.Mode.Kills() || p.Mode.Stalls()) && p.K != c[p.Op] {
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
	var recover []*Result
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
		if res.Held() && res.AtFault != nil && (sel.RecoveryAfter == nil || slices.Contains(sel.RecoveryAfter, p.Mode)) {
			recover = append(recover, res)
		}
	}
	for _, first := range recover {
		for _, p := range sel.recoveryPoints(base.Counts, first) {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
			res, err := h.RunAfter(ctx, sc, *first.Point, p)
			if err != nil {
				return rep, fmt.Errorf("dumpfaults: %s at %s then %s: %w", sc.Name, first.Point, p, err)
			}
			rep.add(res)
			if each != nil {
				each(res)
			}
		}
	}
	return rep, nil
}

// recoveryPoints returns the second faults after the run first: for each
// operation called more often than in the run without fault (base), its
// first call after the fault, and all calls of operations base does not
// make (sampled by RecoverySpread), in RecoveryModes.
func (sel Selection) recoveryPoints(base faults.Counts, first *Result) []faults.Point {
	if len(sel.RecoveryModes) == 0 {
		return nil
	}
	var out []faults.Point
	for _, op := range first.Counts.Ops() {
		at, n := first.AtFault[op], first.Counts[op]
		if n <= at || n <= base[op] {
			continue // no call after the fault, or none more than without it
		}
		ks := []int{at + 1}
		if base[op] == 0 {
			if sel.RecoverySpread < 0 {
				ks = ks[:0]
				for k := 1; k <= n; k++ {
					ks = append(ks, k)
				}
			} else {
				ks = faults.SampleK(n, sel.RecoverySpread)
			}
		}
		for _, k := range ks {
			for _, m := range sel.RecoveryModes {
				p := faults.Point{Op: op, K: k, Mode: m}
				if sel.Match == nil || sel.Match(p) {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
