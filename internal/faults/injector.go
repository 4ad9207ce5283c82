package faults

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
)

// ErrInjected is wrapped by every failure an Injector makes up.
var ErrInjected = errors.New("faults: injected failure")

// Error is the failure an Injector returns for the call at Point.
type Error struct {
	Point Point
}

// Error names the point and says whether the call took effect.
func (e *Error) Error() string {
	return fmt.Sprintf("faults: injected failure of %s (%s)", e.Point, e.Point.Mode.Describe())
}

// Unwrap returns ErrInjected.
func (e *Error) Unwrap() error { return ErrInjected }

// Event is one call an Injector saw, reported to Injector.Observe when it
// returns.
type Event struct {
	Op Op
	K  int // the call's number among Op's calls, from 1
	// Fault is the point that hit this call, nil for a call left alone.
	Fault *Point
	// Err is what the call returned (an *Error for a fault).
	Err error
}

// Injector counts calls per Op and makes the calls at its points fail. It is
// safe for concurrent use. A nil *Injector counts nothing and passes every
// call through.
type Injector struct {
	// Observe, when set, is called after every call, outside the
	// Injector's lock. Set it before the first call.
	Observe func(Event)
	// OnFire, when set, is called when a fault hits, before the call fails,
	// hangs or the process ends (for StallAfter, once the call took
	// effect). Set it before the first call.
	OnFire func(Point)
	// Kill ends the process for Crash and CrashAfter; it must not return.
	// Default: the process kills itself (SIGKILL on Unix), so nothing is
	// flushed or cleaned up.
	Kill func(Point)
	// Stop, when set, is called for Pause and PauseAfter instead of
	// pausing the calls through the injector: in a child process, it
	// stops the whole process (SIGSTOP) until its parent continues it,
	// and returns then. Set it before the first call.
	Stop func(Point)

	points  []Point
	release chan struct{}
	resume  chan struct{}

	mu      sync.Mutex
	calls   map[Op]int
	fired   []Point
	closed  bool // released
	paused  bool // a Pause fired and Resume was not called yet
	resumed bool
}

// New returns an Injector that hits the given points; with none it only
// counts.
func New(points ...Point) *Injector {
	return &Injector{points: points, calls: map[Op]int{}, release: make(chan struct{}), resume: make(chan struct{})}
}

// Resume ends a pause: the paused calls go on. It may be called more than
// once, and before a pause (which then does not wait).
func (in *Injector) Resume() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.resumed {
		in.resumed = true
		close(in.resume)
	}
}

// pause pauses the caller at p: with Stop, the process; otherwise every call
// through the injector until Resume.
func (in *Injector) pause(p Point) {
	if in.Stop != nil {
		in.Stop(p)
		return
	}
	in.mu.Lock()
	in.paused = true
	in.mu.Unlock()
	<-in.resume
}

// waitPaused holds a call while the injector is paused.
func (in *Injector) waitPaused() {
	in.mu.Lock()
	paused := in.paused
	in.mu.Unlock()
	if paused {
		<-in.resume
	}
}

// Counts returns how many calls of each Op were seen so far.
func (in *Injector) Counts() Counts {
	if in == nil {
		return Counts{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.calls)
}

// Fired returns the points that hit a call so far.
func (in *Injector) Fired() []Point {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Point(nil), in.fired...)
}

// Release lets stalled calls go on (and fail without effect), now and from
// now on. It may be called more than once.
func (in *Injector) Release() {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		close(in.release)
	}
}

// next counts a call of op and returns its number and the point hitting it.
func (in *Injector) next(op Op) (int, *Point) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls[op]++
	k := in.calls[op]
	for i := range in.points {
		if p := in.points[i]; p.Op == op && p.K == k {
			in.fired = append(in.fired, p)
			return k, &p
		}
	}
	return k, nil
}

func (in *Injector) kill(p Point) {
	if in.Kill != nil {
		in.Kill(p)
	}
	if proc, err := os.FindProcess(os.Getpid()); err == nil {
		_ = proc.Kill()
	}
	select {} // the signal is on its way
}

// Do makes fn the next call of op, under the plan. ctx, which may be nil,
// ends a Stall early.
func (in *Injector) Do(ctx context.Context, op Op, fn func() error) error {
	_, err := Call(ctx, in, op, func() (struct{}, error) { return struct{}{}, fn() }, nil)
	return err
}

// Call makes fn the next call of op, under in's plan, and returns its result.
// For a Lost fault fn's result is handed to discard (when not nil), which
// drops it as a caller that never got the answer would, and the zero T is
// returned with the failure. ctx, which may be nil, ends a Stall early.
func Call[T any](ctx context.Context, in *Injector, op Op, fn func() (T, error), discard func(T)) (T, error) {
	return CallFailing(ctx, in, op, fn, discard, nil)
}

// CallFailing is Call for an operation whose failure has an effect of its
// own: a Fail fault runs fail instead of fn (when fail is not nil). A
// Closer's Close, say, fails by giving up and releasing the Writer, as its
// contract says, not by leaving it running.
func CallFailing[T any](ctx context.Context, in *Injector, op Op, fn func() (T, error), discard func(T), fail func()) (T, error) {
	if in == nil {
		return fn()
	}
	in.waitPaused()
	k, p := in.next(op)
	if p == nil {
		v, err := fn()
		in.observe(Event{Op: op, K: k, Err: err})
		return v, err
	}
	if in.OnFire != nil && p.Mode != StallAfter && p.Mode != PauseAfter {
		in.OnFire(*p)
	}
	var zero T
	fault := &Error{Point: *p}
	switch p.Mode {
	case Mark:
		v, err := fn()
		in.observe(Event{Op: op, K: k, Fault: p, Err: err})
		return v, err
	case Pause, PauseAfter:
		if p.Mode == Pause {
			in.pause(*p)
		}
		v, err := fn()
		if p.Mode == PauseAfter {
			if in.OnFire != nil {
				in.OnFire(*p) // once the call took effect
			}
			in.pause(*p)
		}
		in.observe(Event{Op: op, K: k, Fault: p, Err: err})
		return v, err
	case Fail:
		if fail != nil {
			fail()
		}
	case Crash:
		in.kill(*p)
	case CrashAfter:
		_, _ = fn()
		in.kill(*p)
	case Lost, StallAfter:
		v, err := fn()
		if p.Mode == StallAfter && in.OnFire != nil {
			in.OnFire(*p) // once the call took effect
		}
		if err != nil && p.Mode == Lost {
			// The call failed by itself: the fault changes nothing.
			in.observe(Event{Op: op, K: k, Fault: p, Err: err})
			return v, err
		}
		if err == nil && discard != nil {
			discard(v)
		}
		if p.Mode == StallAfter {
			in.wait(ctx)
		}
	case Stall:
		in.wait(ctx)
	}
	in.observe(Event{Op: op, K: k, Fault: p, Err: fault})
	return zero, fault
}

// wait holds a stalled call until Release or until ctx (which may be nil)
// is done.
func (in *Injector) wait(ctx context.Context) {
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	select {
	case <-in.release:
	case <-done:
	}
}

func (in *Injector) observe(e Event) {
	if in.Observe != nil {
		in.Observe(e)
	}
}
