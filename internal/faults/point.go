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
// StallAfter hold the call until Injector.Release; Pause and PauseAfter
// pause every call until Injector.Resume, as a process stopped past its
// lease that goes on.
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
	// Pause pauses the caller just before the call, and every call
	// through the injector from then on, until Injector.Resume; then the
	// calls are made as usual: a process stopped (a GC pause, SIGSTOP, a
	// VM migration, a slow request) for longer than its lease, while
	// another takes its claims over, that then goes on. In a child
	// process the injector can stop the whole process instead (Stop).
	Pause
	// PauseAfter makes the call and then pauses as Pause does, before its
	// caller sees the answer.
	PauseAfter
	// Mark makes the call as usual, once Injector.OnFire returned: an
	// event interleaved just before the call (a restore job paused or
	// cancelled from outside, say), not a fault of the call.
	Mark
)

var modeNames = [...]string{Fail: "fail", Lost: "lost", Crash: "crash", CrashAfter: "crash-after", Stall: "stall", StallAfter: "stall-after", Pause: "pause", PauseAfter: "pause-after", Mark: "mark"}

// String returns the mode's name: "fail", "lost", "crash", "crash-after",
// "stall", "stall-after", "pause" or "pause-after".
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
	case Pause:
		return "process paused past its lease before the call, then goes on"
	case PauseAfter:
		return "process paused past its lease after the call took effect, then goes on"
	case Mark:
		return "an event just before the call, which is made as usual"
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
	return 0, fmt.Errorf("faults: unknown mode %q (want fail, lost, crash, crash-after, stall, stall-after, pause, pause-after or mark)", s)
}

// Kills reports whether the mode ends the process.
func (m Mode) Kills() bool { return m == Crash || m == CrashAfter }

// Stalls reports whether the mode holds the call.
func (m Mode) Stalls() bool { return m == Stall || m == StallAfter }

// Pauses reports whether the mode pauses the process.
func (m Mode) Pauses() bool { return m == Pause || m == PauseAfter }

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
