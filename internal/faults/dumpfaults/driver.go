package dumpfaults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
)

// The lines a dump writes about what the Queue answered, one event per line,
// in order: the same in process and from a child process (on its stdout), so
// that one parser (parseLog) reads both.
const (
	lineEnqueue    = "enq"           // enq I RESULT [ERR]: what Enqueue(I) returned, see the results
	lineFlushed    = "flushed"       // flushed N: Flush after N records returned nil
	lineFlushErr   = "flusherr"      // flusherr N ERR
	lineOpenErr    = "openerr"       // openerr ERR: NewQueue failed
	lineClosed     = "closed"        // closed: Close (Shutdown) returned nil
	lineCloseErr   = "closeerr"      // closeerr ERR
	lineCloseCount = "shutdowncount" // shutdowncount NOTWRITTEN NOTSYNCED HELD HELDSEGMENTS INDOUBT: Close's *dlqdump.ShutdownError
	lineStuck      = "stuck"         // stuck WHY: the run gave up on the sink
	lineHung       = "hung"          // hung WHAT: a call did not return
	lineDone       = "done"          // the dump ran to its end
)

// What Enqueue returned, by what it says of the record.
const (
	resAck        = "ack"        // nil
	resNotDurable = "notdurable" // ErrNotDurable: accepted, not yet synced
	resNotWritten = "notwritten" // ErrNotWritten: not in the dump
	resNotSynced  = "notsynced"  // ErrNotSynced: written, the next start publishes it
	resInDoubt    = "indoubt"    // ErrInDoubt: may or may not be stored
	resRefused    = "refused"    // any other error: not accepted
)

// enqueueResult classifies what Enqueue returned.
func enqueueResult(err error) string {
	switch {
	case err == nil:
		return resAck
	case errors.Is(err, dlqdump.ErrNotDurable):
		return resNotDurable
	case errors.Is(err, dlqdump.ErrNotWritten):
		return resNotWritten
	case errors.Is(err, dlqdump.ErrNotSynced):
		return resNotSynced
	case errors.Is(err, dlqdump.ErrInDoubt):
		return resInDoubt
	}
	return resRefused
}

// Bounds of a run. They only detect hangs and sinks that never recover; a
// run that works takes milliseconds.
const (
	// stuckAfter is how many genuine sink failures (not injected) a run
	// tolerates before it gives up: the Queue's back-off reaches it in a
	// few seconds.
	stuckAfter = 5
	// hangAfter is how long Shutdown may take once its context is done
	// (or a whole in-process run may take) before the run reports a hang.
	hangAfter = 5 * time.Second
	// openAttempts is how often the dump calls NewQueue (a user restarting
	// after NewQueue failed) before it gives up.
	openAttempts = 3
)

// dump runs the scenario through a Writer from open and reports every answer
// to emit. A NewQueue that fails is tried again with a new Writer, as a user
// restarting would: the failed NewQueue closed the one it had. ctx is
// the run's deadline: when it is done (the run gave up on a stuck sink, or a
// Stall fault hit) the dump stops enqueueing and calls Shutdown with it.
// dump returns when Shutdown and the enqueueing returned or, if they do not
// within hangAfter of ctx being done, after emitting lineHung (leaving them
// running).
func dump(ctx context.Context, sc Scenario, open func() dlqdump.Writer, emit func(string)) {
	var q *dlqdump.Queue
	for attempt := 1; ; attempt++ {
		var err error
		if q, err = dlqdump.NewQueue(sc.config(open())); err == nil {
			break
		}
		emit(lineOpenErr + " " + oneLine(err))
		if attempt == openAttempts || ctx.Err() != nil {
			emit(lineDone)
			return
		}
	}
	var closeErr error
	closed := make(chan struct{})
	shutdown := sync.OnceFunc(func() {
		closeErr = q.Shutdown(ctx)
		close(closed)
	})
	enqueued := make(chan struct{})
	go func() {
		defer close(enqueued)
		enqueue(ctx, sc, q, emit)
	}()
	// A done ctx ends the dump at once: Shutdown releases the Enqueue and
	// Flush calls waiting for the sink.
	select {
	case <-enqueued:
	case <-ctx.Done():
	}
	go shutdown()
	if !waitBounded(ctx, closed) || !waitBounded(ctx, enqueued) {
		emit(lineHung + " Queue.Shutdown did not return " + hangAfter.String() + " after its context was done")
		return
	}
	if closeErr != nil {
		var se *dlqdump.ShutdownError
		if errors.As(closeErr, &se) {
			emit(fmt.Sprintf("%s %d %d %d %d %d", lineCloseCount, se.NotWritten, se.NotSynced, se.Held, se.HeldSegments, se.InDoubt))
		}
		emit(lineCloseErr + " " + oneLine(closeErr))
	} else {
		emit(lineClosed)
	}
	emit(lineDone)
}

// enqueue enqueues the scenario's records, one after the other, with a Flush
// after FlushAt of them, until ctx is done.
func enqueue(ctx context.Context, sc Scenario, q *dlqdump.Queue, emit func(string)) {
	for i := range sc.Records {
		if ctx.Err() != nil {
			return
		}
		if err := q.Enqueue(payload(i)); err != nil {
			emit(fmt.Sprintf("%s %d %s %s", lineEnqueue, i, enqueueResult(err), oneLine(err)))
		} else {
			emit(fmt.Sprintf("%s %d %s", lineEnqueue, i, resAck))
		}
		if i+1 == sc.FlushAt && ctx.Err() == nil {
			if err := q.Flush(ctx); err != nil {
				emit(fmt.Sprintf("%s %d %s", lineFlushErr, i+1, oneLine(err)))
			} else {
				emit(fmt.Sprintf("%s %d", lineFlushed, i+1))
			}
		}
	}
}

// waitBounded waits for done; once ctx is done it waits at most hangAfter
// more and reports whether done came.
func waitBounded(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(hangAfter)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// oneLine returns err's text on one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " | ")
}
