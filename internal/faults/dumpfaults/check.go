package dumpfaults

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlqdump/dlqdump/internal/faults"
)

// Kinds of violation: which invariant a run broke.
const (
	// Lost: a record the dump had to keep is not stored after the restart.
	Lost = "lost"
	// NotStoredAtClose: Close returned nil before every accepted record
	// was stored where readers find it.
	NotStoredAtClose = "not-stored-at-close"
	// Duplicate: a record is stored more than once.
	Duplicate = "duplicate"
	// RefusedButStored: Enqueue said the record was not dumped (an error
	// other than ErrNotDurable, ErrNotSynced, ErrInDoubt), and it is stored.
	RefusedButStored = "refused-but-stored"
	// Damaged: a stored segment is unreadable, unsealed or holds foreign
	// records, or recovery quarantined one.
	Damaged = "damaged"
	// Leftover: a temporary file, spool file or unfinished multipart
	// upload is left after the restart.
	Leftover = "leftover"
	// WrongCount: Close's error counts other records as not stored than
	// are missing.
	WrongCount = "wrong-count"
	// NoCount: Close failed without a *dlqdump.ShutdownError saying how
	// many records it did not store.
	NoCount = "no-count"
	// CloseFailed: Close failed after transient faults (Fail, Lost), which
	// the Queue should have retried.
	CloseFailed = "close-failed"
	// Stuck: after the fault the sink kept failing; the dump never
	// recovered.
	Stuck = "stuck"
	// Hung: a call did not return (Shutdown after its deadline, a child).
	Hung = "hung"
	// RestartFailed: the restart on the same store (NewQueue, Close)
	// failed.
	RestartFailed = "restart-failed"
)

// Violation is one broken invariant.
type Violation struct {
	Kind   string
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// observation is everything known after one run, for Check.
type observation struct {
	sc    Scenario
	point *faults.Point // nil for the run without fault
	first *faults.Point // the fault before point, if any
	log   *runLog
	// atClose is the store read the moment Close returned (in process),
	// or once the child that returned from Close ended; nil when Close
	// did not return.
	atClose *contents
	// after is the store after the restart, and leftover what the restart
	// left.
	after      *contents
	leftover   []string
	restartErr error
	killed     bool // the child died at the point
}

// check returns the invariants the run broke:
//
//   - every record whose Enqueue returned nil is stored after the restart —
//     after a kill in buffered mode only those a successful Flush (where
//     Flush makes them survive a crash: FlushStores) or Close covered;
//     after Close returned nil, also those Enqueue accepted with
//     ErrNotDurable; and those Enqueue said were written but not synced;
//   - Close returned nil only once every accepted record was stored;
//   - no record is stored twice; none that Enqueue refused or said was
//     not written is stored;
//   - every segment is sealed and readable; recovery quarantined nothing;
//   - no temporary file, spool file or multipart upload is left after the
//     restart;
//   - Close's error is a *dlqdump.ShutdownError whose counts are true: at
//     Close, NotWritten records that entered the Queue are not stored, plus
//     up to NotSynced+Held+InDoubt; after the restart, NotWritten plus up to
//     InDoubt; after Fail and Lost faults Close does not fail at all,
//     unless one hit Writer.Close, which the Queue calls once;
//   - the dump neither got stuck nor hung, and the restart worked.
func check(o *observation) []Violation {
	var vs []Violation
	add := func(kind, format string, args ...any) {
		vs = append(vs, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	l := o.log
	if l.stuck != "" {
		add(Stuck, "%s", l.stuck)
	}
	if l.hung != "" {
		add(Hung, "%s", l.hung)
	}
	if o.restartErr != nil {
		add(RestartFailed, "%v", o.restartErr)
	}
	if o.atClose != nil && l.closed {
		if miss := missing(o.sc, l.accepted, o.atClose); len(miss) > 0 {
			add(NotStoredAtClose, "Close returned nil with %d of %d accepted records not stored yet: %s",
				len(miss), count(o.sc, l.accepted), sample(miss))
		}
	}
	notDumped := l.is(resRefused, resNotWritten)
	for _, c := range []*contents{o.atClose, o.after} {
		if c == nil {
			continue
		}
		for _, p := range c.problems {
			add(Damaged, "%s", p)
		}
		if dups := stored(o.sc, func(int) bool { return true }, c, 2); len(dups) > 0 {
			add(Duplicate, "%d records stored more than once: %s", len(dups), sample(dups))
		}
		if bad := stored(o.sc, notDumped, c, 1); len(bad) > 0 {
			add(RefusedButStored, "%d records stored although Enqueue said they were not dumped (record %d: %s %q)",
				len(bad), bad[0], l.results[bad[0]], l.errs[bad[0]])
		}
	}
	if o.after == nil {
		return dedupe(vs)
	}
	required := o.required()
	if miss := missing(o.sc, required, o.after); len(miss) > 0 {
		add(Lost, "%d of %d records the dump had to keep are not stored after the restart (%s): %s",
			len(miss), count(o.sc, required), o.requiredWhy(), sample(miss))
	}
	for _, left := range o.leftover {
		add(Leftover, "%s", left)
	}
	if l.returned && !l.closed {
		vs = append(vs, o.checkCounts()...)
	}
	return dedupe(vs)
}

// checkCounts checks a failed Close's counts against the store.
func (o *observation) checkCounts() []Violation {
	l := o.log
	var vs []Violation
	add := func(kind, format string, args ...any) {
		vs = append(vs, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	// The Queue calls Writer.Close once (sink.Closer) and can only pass
	// its failure on; any other transient fault it must retry.
	if o.transient() && l.stuck == "" {
		add(CloseFailed, "Close failed after %s: %s", o.faultsDone(), l.closeErr)
	}
	c := l.counts
	if c == nil {
		add(NoCount, "Close failed without a *dlqdump.ShutdownError counting the records not stored: %s", l.closeErr)
		return vs
	}
	if o.atClose != nil {
		// Records not synced or held may be stored already (a Commit
		// whose answer was lost published them; a Writer whose Close
		// failed may still upload them): Close promises they are stored
		// by the next start, which the check after the restart holds it
		// to. Records not written must be missing.
		miss := len(missing(o.sc, l.entered, o.atClose))
		lo := c.notWritten
		if miss < lo || miss > lo+c.notSynced+c.held+c.inDoubt {
			add(WrongCount, "at Close %d records that entered the Queue are not stored; Close counts %d not written + %d not synced + %d held + %d in doubt: %s",
				miss, c.notWritten, c.notSynced, c.held, c.inDoubt, l.closeErr)
		}
	}
	miss := len(missing(o.sc, l.entered, o.after))
	if miss < c.notWritten || miss > c.notWritten+c.inDoubt {
		add(WrongCount, "after the restart %d records that entered the Queue are not stored; Close counts %d not written + %d in doubt (the %d not synced and %d held are stored by the restart): %s",
			miss, c.notWritten, c.inDoubt, c.notSynced, c.held, l.closeErr)
	}
	return vs
}

// transient reports whether the run's faults were all Fail or Lost, none of
// them at Writer.Close.
func (o *observation) transient() bool {
	if o.point == nil {
		return false
	}
	for _, p := range []*faults.Point{o.first, o.point} {
		if p != nil && (p.Mode != faults.Fail && p.Mode != faults.Lost || p.Op == faults.OpWriterClose) {
			return false
		}
	}
	return true
}

// faultsDone names the run's faults.
func (o *observation) faultsDone() string {
	if o.first != nil {
		return fmt.Sprintf("two faults (%s, then %s)", o.first, o.point)
	}
	return fmt.Sprintf("one %s fault", o.point.Mode)
}

// required returns the test for the records that must be stored after the
// restart.
func (o *observation) required() func(int) bool {
	l := o.log
	notSynced := l.is(resNotSynced)
	switch {
	case l.closed:
		return func(i int) bool { return l.accepted(i) || notSynced(i) }
	case o.sc.Durable:
		return l.is(resAck, resNotSynced)
	case o.sc.FlushStores():
		return func(i int) bool { return l.is(resAck)(i) && i < l.flushed || notSynced(i) }
	}
	return notSynced
}

func (o *observation) requiredWhy() string {
	l := o.log
	switch {
	case l.closed:
		return "Close returned nil"
	case o.sc.Durable:
		return "Durable: every acknowledged record"
	case o.sc.FlushStores():
		return fmt.Sprintf("the %d records before the last successful Flush", l.flushed)
	}
	return "those Enqueue said were written"
}

// stored returns the records for which want is true that c holds at least
// min times.
func stored(sc Scenario, want func(int) bool, c *contents, min int) []int {
	var out []int
	for i := range sc.Records {
		if want(i) && c.counts[i] >= min {
			out = append(out, i)
		}
	}
	return out
}

// missing returns the records for which want is true that c does not hold.
func missing(sc Scenario, want func(int) bool, c *contents) []int {
	var out []int
	for i := range sc.Records {
		if want(i) && c.counts[i] == 0 {
			out = append(out, i)
		}
	}
	return out
}

func count(sc Scenario, want func(int) bool) int {
	n := 0
	for i := range sc.Records {
		if want(i) {
			n++
		}
	}
	return n
}

// sample names up to 5 records.
func sample(recs []int) string {
	var b strings.Builder
	for j, i := range recs {
		if j == 5 {
			fmt.Fprintf(&b, " ... (%d more)", len(recs)-5)
			break
		}
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString("#" + strconv.Itoa(i))
	}
	return b.String()
}

// dedupe drops repeated violations (the same problem seen at Close and
// after the restart).
func dedupe(vs []Violation) []Violation {
	seen := map[Violation]bool{}
	out := vs[:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
