package dumpfaults

import (
	"fmt"
	"strconv"
	"strings"
)

// runLog is what the Queue answered during one run, read from the lines
// dump emitted.
type runLog struct {
	acked      map[int]bool   // Enqueue returned nil
	notDurable map[int]string // Enqueue returned ErrNotDurable: accepted
	refused    map[int]string // Enqueue returned another error: not dumped
	flushed    int            // records covered by the last successful Flush
	flushErrs  []string
	openErrs   []string
	closed     bool   // Close returned nil
	closeErr   string // Close's error, "" if none or not returned
	returned   bool   // Close returned at all
	stuck      string
	hung       string
	done       bool // the dump ran to its end (a child was not killed)
}

// parseLog reads the lines of one run.
func parseLog(lines []string) (*runLog, error) {
	l := &runLog{acked: map[int]bool{}, notDurable: map[int]string{}, refused: map[int]string{}}
	for _, line := range lines {
		kind, rest, _ := strings.Cut(line, " ")
		num := func() (int, string, error) {
			ns, msg, _ := strings.Cut(rest, " ")
			n, err := strconv.Atoi(ns)
			if err != nil {
				return 0, "", fmt.Errorf("dumpfaults: bad line %q", line)
			}
			return n, msg, nil
		}
		switch kind {
		case lineAck, lineNotDurable, lineRefused, lineFlushed, lineFlushErr:
			n, msg, err := num()
			if err != nil {
				return nil, err
			}
			switch kind {
			case lineAck:
				l.acked[n] = true
			case lineNotDurable:
				l.notDurable[n] = msg
			case lineRefused:
				l.refused[n] = msg
			case lineFlushed:
				l.flushed = n
			case lineFlushErr:
				l.flushErrs = append(l.flushErrs, msg)
			}
		case lineOpenErr:
			l.openErrs = append(l.openErrs, rest)
		case lineClosed:
			l.closed, l.returned = true, true
		case lineCloseErr:
			l.closeErr, l.returned = rest, true
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

// accepted reports whether record i was accepted: Enqueue returned nil or
// ErrNotDurable.
func (l *runLog) accepted(i int) bool {
	_, nd := l.notDurable[i]
	return l.acked[i] || nd
}
