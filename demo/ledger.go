package main

import (
	"fmt"
	"io"
)

// ledger says where every task this process knows ended: the demo's
// promise is that each task accepted (answered 202, or made by a producer)
// is processed or in the dump, and that the counts add up.
type ledger struct {
	Accepted    uint64 `json:"accepted"`    // accepted by this process
	Adopted     uint64 `json:"adopted"`     // found in the dump, accepted by an earlier run
	Done        int64  `json:"processed"`   // processed
	InDump      int64  `json:"in_dump"`     // in the dump, to be restored
	Quarantined int64  `json:"quarantined"` // moved aside by the Restorer (kept in the dump's quarantine)
	Lost        int64  `json:"lost"`        // the dump refused them with nobody to tell
	InFlight    int64  `json:"in_flight"`   // queued, running, waiting for a retry, being restored
	Unaccounted uint64 `json:"unaccounted"` // a stop could not place them (counted when it gave up)
	Stopped     bool   `json:"stopped"`     // no scene runs: InFlight must be 0
}

// ledger counts the tasks by state. Taken while no scene runs, every
// accepted task must be done, in the dump or quarantined.
func (a *App) ledger() ledger {
	st := a.store
	l := ledger{
		Accepted:    a.c.produced.Load(),
		Adopted:     st.adopted.Load(),
		Done:        st.counts[stDone].Load() + st.evicted.Load(),
		InDump:      st.counts[stDumped].Load(),
		Quarantined: st.counts[stQuarantined].Load(),
		Lost:        st.counts[stFailed].Load(),
		InFlight:    st.counts[stQueued].Load() + st.counts[stRunning].Load() + st.counts[stRestored].Load(),
		Unaccounted: a.c.unaccounted.Load(),
		Stopped:     a.current() == nil,
	}
	return l
}

// sum is every task the ledger places.
func (l ledger) sum() int64 {
	return l.Done + l.InDump + l.Quarantined + l.Lost + l.InFlight
}

// check returns nil when nothing is lost and the counts add up: accepted +
// adopted = processed + in the dump + quarantined (+ in flight while a scene
// runs). Otherwise it says what is wrong.
func (l ledger) check() error {
	var probs []string
	if l.Lost > 0 {
		probs = append(probs, fmt.Sprintf("%d lost (the dump refused them)", l.Lost))
	}
	if l.Stopped && l.InFlight > 0 {
		probs = append(probs, fmt.Sprintf("%d neither processed nor in the dump after the stop", l.InFlight))
	}
	if l.Unaccounted > 0 {
		probs = append(probs, fmt.Sprintf("%d not placed when their scene stopped", l.Unaccounted))
	}
	if known := int64(l.Accepted + l.Adopted); known != l.sum() {
		probs = append(probs, fmt.Sprintf("accepted %d + found in the dump %d = %d, but %d are placed", l.Accepted, l.Adopted, known, l.sum()))
	}
	if len(probs) == 0 {
		return nil
	}
	err := fmt.Errorf("tasks: %s", probs[0])
	for _, p := range probs[1:] {
		err = fmt.Errorf("%w; %s", err, p)
	}
	return err
}

// OK reports whether check finds nothing wrong.
func (l ledger) OK() bool { return l.check() == nil }

// Print writes the counts and a verdict line.
func (l ledger) Print(w io.Writer) {
	l.printCounts(w)
	if err := l.check(); err != nil {
		fmt.Fprintf(w, "FAILED: %v\n", err)
		return
	}
	fmt.Fprintln(w, "OK: every accepted task was processed or is in the dump")
}

// printCounts writes the line of counts.
func (l ledger) printCounts(w io.Writer) {
	fmt.Fprintf(w, "tasks: %d accepted + %d found in the dump = %d processed + %d in the dump + %d quarantined + %d lost",
		l.Accepted, l.Adopted, l.Done, l.InDump, l.Quarantined, l.Lost)
	if l.InFlight > 0 || l.Stopped {
		fmt.Fprintf(w, " + %d still in the queue", l.InFlight)
	}
	fmt.Fprintln(w)
}
