package dumpfaults

import (
	"fmt"
	"strconv"
	"strings"
)

// runLog is what the Queue answered during one run, read from the lines
// dump emitted.
type runLog struct {
	results   map[int]string // what Enqueue(i) returned: resAck, resRefused, ...
	errs      map[int]string // and its error
	flushed   int            // records covered by the last successful Flush
	flushErrs []string
	openErrs  []string
	closed    bool   // Close returned nil
	closeErr  string // Close's error, "" if none or not returned
	returned  bool   // Close returned at all
	counts    *shutdownCounts
	stuck     string
	hung      string
	done      bool // the dump ran to its end (a child was not killed)
}

// shutdownCounts are the counts of a *dlqdump.ShutdownError.
type shutdownCounts struct {
	notWritten, notSynced, held, heldSegments, inDoubt int
}

// parseLog reads the lines of one run.
func parseLog(lines []string) (*runLog, error) {
	l := &runLog{results: map[int]string{}, errs: map[int]string{}}
	for _, line := range lines {
		kind, rest, _ := strings.Cut(line, " ")
		bad := fmt.Errorf("dumpfaults: bad line %q", line)
		switch kind {
		case lineEnqueue:
			f := strings.SplitN(rest, " ", 3)
			i, err := strconv.Atoi(f[0])
			if err != nil || len(f) < 2 {
				return nil, bad
			}
			l.results[i] = f[1]
			if len(f) == 3 {
				l.errs[i] = f[2]
			}
		case lineFlushed, lineFlushErr:
			ns, msg, _ := strings.Cut(rest, " ")
			n, err := strconv.Atoi(ns)
			if err != nil {
				return nil, bad
			}
			if kind == lineFlushed {
				l.flushed = n
			} else {
				l.flushErrs = append(l.flushErrs, msg)
			}
		case lineOpenErr:
			l.openErrs = append(l.openErrs, rest)
		case lineClosed:
			l.closed, l.returned = true, true
		case lineCloseErr:
			l.closeErr, l.returned = rest, true
		case lineCloseCount:
			c := &shutdownCounts{}
			if _, err := fmt.Sscan(rest, &c.notWritten, &c.notSynced, &c.held, &c.heldSegments, &c.inDoubt); err != nil {
				return nil, bad
			}
			l.counts = c
		case lineStuck:
			l.stuck = rest
		case lineHung:
			l.hung = rest
		case lineDone:
			l.done = true
		default:
			// Not ours (a child's stray output): ignored.
		}
	}
	return l, nil
}

// is returns the test "Enqueue(i) returned one of results".
func (l *runLog) is(results ...string) func(int) bool {
	return func(i int) bool {
		r, ok := l.results[i]
		if !ok {
			return false
		}
		for _, want := range results {
			if r == want {
				return true
			}
		}
		return false
	}
}

// accepted reports whether Enqueue accepted record i: nil or ErrNotDurable.
func (l *runLog) accepted(i int) bool { return l.is(resAck, resNotDurable)(i) }

// entered reports whether record i entered the Queue: accepted, or refused
// by Shutdown with the record's fate (not written, not synced, in doubt).
func (l *runLog) entered(i int) bool {
	return l.is(resAck, resNotDurable, resNotWritten, resNotSynced, resInDoubt)(i)
}
