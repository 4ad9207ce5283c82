package faults

import (
	"fmt"
	"strconv"
	"strings"
)

// Op names an operation whose calls are counted, such as "Segment.Commit" or
// "s3.PutObject". Wrappers define their own; see the Op constants.
type Op string

// Mode is what an injected fault does to the call it hits.
type Mode uint8

// Modes. Fail and Lost run in process; Crash and CrashAfter end the process
// and are meant for a child process that a test restarts; Stall and
// StallAfter hold the call until Injector.Release.
const (
	// Fail makes the call fail without effect: it is not made.
	Fail Mode = iota + 1
	// Lost makes the call and then reports failure, as when the answer of
	// a rename or a PUT that happened is lost.
	Lost
	// Crash ends the process just before the call.
	Crash
	// CrashAfter ends the process just after the call took effect, before
	// its caller sees the answer.
	CrashAfter
	// Stall holds the call until Injector.Release (or the call's context,
	// when it has one, is done) and then fails it without effect: a sink
	// that hangs.
	Stall
	// StallAfter makes the call, then holds its answer as Stall does and
	// fails it: a request that took effect and whose answer never came.
	StallAfter
)

var modeNames = [...]string{Fail: "fail", Lost: "lost", Crash: "crash", CrashAfter: "crash-after", Stall: "stall", StallAfter: "stall-after"}

// String returns "fail", "lost", "crash", "crash-after" or "stall".
func (m Mode) String() string {
	if int(m) < len(modeNames) && modeNames[m] != "" {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Describe says in words what the mode does.
func (m Mode) Describe() string {
	switch m {
	case Fail:
		return "fails without effect"
	case Lost:
		return "takes effect, reports failure"
	case Crash:
		return "process killed before the call"
	case CrashAfter:
		return "process killed after the call took effect"
	case Stall:
		return "hangs until the run gives up"
	case StallAfter:
		return "takes effect, its answer hangs until the run gives up"
	}
	return m.String()
}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if name != "" && name == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("faults: unknown mode %q (want fail, lost, crash, crash-after, stall or stall-after)", s)
}

// Kills reports whether the mode ends the process.
func (m Mode) Kills() bool { return m == Crash || m == CrashAfter }

// Stalls reports whether the mode holds the call.
func (m Mode) Stalls() bool { return m == Stall || m == StallAfter }

// Point is a fault point: the K-th call (counted from 1) of Op, hit in Mode.
type Point struct {
	Op   Op
	K    int
	Mode Mode
}

// String returns "OP#K/MODE", e.g. "Segment.Commit#3/lost"; ParsePoint reads
// it back.
func (p Point) String() string {
	return fmt.Sprintf("%s#%d/%s", p.Op, p.K, p.Mode)
}

// ParsePoint parses the form Point.String returns.
func ParsePoint(s string) (Point, error) {
	opk, mode, ok := strings.Cut(s, "/")
	if !ok {
		return Point{}, fmt.Errorf("faults: point %q: want OP#K/MODE", s)
	}
	op, ks, ok := strings.Cut(opk, "#")
	if !ok || op == "" {
		return Point{}, fmt.Errorf("faults: point %q: want OP#K/MODE", s)
	}
	k, err := strconv.Atoi(ks)
	if err != nil || k < 1 {
		return Point{}, fmt.Errorf("faults: point %q: K must be a number from 1", s)
	}
	m, err := ParseMode(mode)
	if err != nil {
		return Point{}, fmt.Errorf("faults: point %q: %w", s, err)
	}
	return Point{Op: Op(op), K: k, Mode: m}, nil
}
