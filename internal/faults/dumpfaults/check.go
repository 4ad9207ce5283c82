package dumpfaults

import (
	"fmt"
	"regexp"
	"slices"
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
	// RefusedButStored: Enqueue said the record was not dumped, and it is
	// stored.
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
	// NoCount: Close failed without saying how many records it did not
	// store.
	NoCount = "no-count"
	// CloseFailed: Close failed after a single transient fault, which the
	// Queue should have retried.
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
	log   *runLog
	// atClose is the store read right after Close returned nil, before
	// anything else ran; nil when not read (Close failed, or a child).
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
//     ErrNotDurable;
//   - Close returned nil only once every accepted record was stored;
//   - no record is stored twice; no record Enqueue refused is stored;
//   - every segment is sealed and readable; recovery quarantined nothing;
//   - no temporary file, spool file or multipart upload is left after the
//     restart;
//   - Close's error counts exactly the accepted records that are not
//     stored after the restart (plus, if it likes, those whose Enqueue it
//     refused); after a single Fail or Lost fault Close does not fail at
//     all;
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
	for _, c := range []*contents{o.atClose, o.after} {
		if c == nil {
			continue
		}
		for _, p := range c.problems {
			add(Damaged, "%s", p)
		}
		var dups []int
		for i, n := range c.counts {
			if n > 1 {
				dups = append(dups, i)
			}
		}
		if len(dups) > 0 {
			slices.Sort(dups)
			add(Duplicate, "%d records stored more than once: %s", len(dups), sample(dups))
		}
		var refused []int
		for i := range l.refused {
			if c.counts[i] > 0 {
				refused = append(refused, i)
			}
		}
		if len(refused) > 0 {
			slices.Sort(refused)
			add(RefusedButStored, "%d records stored although Enqueue said they were not (record %d: %q)",
				len(refused), refused[0], l.refused[refused[0]])
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
		miss := len(missing(o.sc, l.accepted, o.after))
		// Records whose Enqueue was refused may be counted again or not.
		refused := len(missing(o.sc, func(i int) bool { _, ok := l.refused[i]; return ok }, o.after))
		if n, ok := countNotStored(l.closeErr); !ok {
			add(NoCount, "Close failed without counting the records not stored (%d are missing): %s", miss, l.closeErr)
		} else if n != miss && n != miss+refused {
			add(WrongCount, "Close says %d records were not stored; after the restart %d accepted ones are missing (and %d refused by Enqueue): %s", n, miss, refused, l.closeErr)
		}
		if o.point != nil && (o.point.Mode == faults.Fail || o.point.Mode == faults.Lost) && l.stuck == "" {
			add(CloseFailed, "Close failed after one %s fault: %s", o.point.Mode, l.closeErr)
		}
	}
	return dedupe(vs)
}

// required returns the test for the records that must be stored after the
// restart.
func (o *observation) required() func(int) bool {
	l := o.log
	switch {
	case l.closed:
		return l.accepted
	case o.sc.Durable:
		return func(i int) bool { return l.acked[i] }
	case o.sc.FlushStores():
		return func(i int) bool { return l.acked[i] && i < l.flushed }
	}
	return func(int) bool { return false }
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
	return "none"
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

// notStoredRe finds the count of records an error says were not stored.
var notStoredRe = regexp.MustCompile(`(\d+) records? (?:were |was )?not (?:yet )?(?:written|stored|dumped|published)`)

// countNotStored returns the number of records msg says were not stored.
func countNotStored(msg string) (int, bool) {
	m := notStoredRe.FindStringSubmatch(msg)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
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
