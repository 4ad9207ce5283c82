package dumpfaults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/faults"
)

// runCap bounds an in-process run that neither finishes nor fails: past it
// the run is ended as stuck. A run takes milliseconds.
const runCap = 2 * time.Minute

// runInProcess runs the scenario in this process with the fault at p (nil:
// none), after the fault at first (nil: none), reads the store the moment
// Close returns, then restarts and checks.
func (h *Harness) runInProcess(ctx context.Context, sc Scenario, st *Store, first, p *faults.Point) (*Result, error) {
	o := &observation{sc: sc, point: p, first: first}
	var mu sync.Mutex
	var lines []string
	var readErr error
	var r *run
	emit := func(line string) {
		mu.Lock()
		lines = append(lines, line)
		mu.Unlock()
		if line == lineClosed || strings.HasPrefix(line, lineCloseErr+" ") {
			// Close returned: what it said must be true now. The dump
			// waits for this read.
			o.atClose, readErr = st.contents(ctx, sc)
		}
	}
	var points []faults.Point
	for _, q := range []*faults.Point{first, p} {
		if q != nil {
			points = append(points, *q)
		}
	}
	r = newRun(ctx, points, emit)
	defer r.cancel()
	var ws []dlqdump.Writer // read once dump has returned
	open := func() dlqdump.Writer {
		w := st.writer(sc, r.in, h.logger())
		ws = append(ws, w)
		return w
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dump(r.ctx, sc, open, emit)
	}()
	capTimer := time.NewTimer(runCap)
	select {
	case <-done:
	case <-capTimer.C:
		emit(fmt.Sprintf("%s the run did not finish within %s", lineStuck, runCap))
		r.cancel()
		<-done // dump is bounded once its context is done
	}
	capTimer.Stop()
	r.in.Release()
	// What the end of the process would release: the files of segments
	// the Queue dropped (after an Abort that failed, say), so that the
	// restart's Recover may take them over.
	for _, w := range ws {
		faults.ReleaseSegments(w)
	}
	if readErr != nil {
		return nil, fmt.Errorf("dumpfaults: read the store at Close: %w", readErr)
	}
	mu.Lock()
	res := &Result{Scenario: sc.Name, Point: p, First: first, Counts: r.in.Counts(), AtFault: r.countsAtFault(), Lines: append([]string(nil), lines...)}
	mu.Unlock()
	res.Reached = p == nil || slices.Contains(r.in.Fired(), *p)
	var err error
	if o.log, err = parseLog(res.Lines); err != nil {
		return nil, err
	}
	if o.log.hung != "" {
		// The Queue may still be running: a restart would race it.
		res.Violations = check(o)
		return res, nil
	}
	if err := h.observeAfter(ctx, o, st); err != nil {
		return nil, err
	}
	res.Violations = check(o)
	return res, nil
}
