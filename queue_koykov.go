package dlqdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump/internal/backoff"
)

// CloseAfter closes feeder, a koykov queue whose DLQ is this Queue, waits
// until its workers have stopped, and then closes this Queue (see Close):
// the shutdown that loses nothing. Defer it once, after creating feeder.
//
// koykov's Close returns at once, while its workers go on until the queue is
// empty, handing the DLQ every item that fails in them (FailToDLQ) or whose
// deadline passed (DeadlineToDLQ). A dump closed before they stop refuses
// those items with ErrClosed, and koykov drops that error: the items are in
// neither place (they are counted in Stats().Refused.Closed). CloseAfter
// closes in the order that keeps them.
//
// Stop feeding feeder first: koykov v1.1.6 panics ("send on closed
// channel") when an Enqueue races its Close, and when a worker retries an
// item after Close (MaxRetries > 0 and an item failing again).
//
// koykov v1.1.6 says nothing when its workers stop, so CloseAfter reads their
// states (feeder.String()) every few milliseconds until none is running or
// sleeping. With a fixed pool (queue.Config.Workers) a worker is reported
// stopped only once it has handled its last item, so nothing is lost. With a
// balanced pool (WorkersMin < WorkersMax, or a Schedule) koykov marks every
// worker stopped as soon as the queue is empty, even one still inside
// Worker.Do: an item failing in that last call arrives after the dump
// closed, and is refused and counted, not stored.
func (q *Queue) CloseAfter(feeder *queue.Queue) error {
	return q.ShutdownAfter(context.Background(), feeder)
}

// ShutdownAfter is CloseAfter bounded by ctx, which bounds the whole: the
// wait for feeder's workers, then this Queue's Shutdown(ctx). If ctx ends
// while workers still run, it says how many, shuts this Queue down at once
// (the *ShutdownError counts what is not stored), and what fails in them
// afterwards is refused and counted in Stats().Refused.Closed.
func (q *Queue) ShutdownAfter(ctx context.Context, feeder *queue.Queue) error {
	var errs []error
	// A queue that failed to start (queue.New's error) has no engine and
	// no workers: nothing to close or wait for.
	if feeder != nil && feeder.Error() == nil {
		if err := closeFeeder(feeder); err != nil {
			errs = append(errs, err)
		}
		if err := waitFeeder(ctx, feeder); err != nil {
			q.log.Error("closing the dump while its feeding queue is not done", slog.Any("error", err))
			errs = append(errs, err)
		}
	}
	if err := q.Shutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// closeFeeder closes a koykov queue; one closed already is fine.
func closeFeeder(feeder *queue.Queue) error {
	if err := feeder.Close(); err != nil && !errors.Is(err, queue.ErrQueueClosed) {
		return fmt.Errorf("dlqdump: close the feeding queue: %w", err)
	}
	return nil
}

// feederState is what a koykov queue's String says of its workers.
type feederState struct {
	Active int `json:"workers_active"`
	Sleep  int `json:"workers_sleep"`
}

// feederPoll bounds the interval between two looks at a koykov queue's
// workers: the second is a millisecond after the first, each wait twice the
// one before, up to feederPoll.
const feederPoll = 20 * time.Millisecond

// waitFeeder waits until no worker of feeder is running or sleeping, or ctx
// ends. Then an item left in feeder has no worker to take it: an error.
//
// koykov's String reads the queue's status without synchronisation; after
// Close only a balanced pool's heartbeat writes it, and only when it finds
// the queue full (a race of koykov v1.1.6 with any caller of String).
func waitFeeder(ctx context.Context, feeder *queue.Queue) error {
	var st feederState
	for wait := time.Millisecond; ; wait = min(2*wait, feederPoll) {
		st = feederState{}
		if err := json.Unmarshal([]byte(feeder.String()), &st); err != nil {
			return fmt.Errorf("dlqdump: read the feeding queue's worker states: %w", err)
		}
		if st.Active == 0 && st.Sleep == 0 {
			break
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("dlqdump: the feeding queue's workers had not stopped (%d running, %d sleeping, %d items queued): what fails in them from now on is refused: %w",
				st.Active, st.Sleep, feeder.Size(), err)
		}
	}
	if n := feeder.Size(); n > 0 {
		return fmt.Errorf("dlqdump: the feeding queue holds %d items and no worker to take them (its pool has no minimum): they are neither processed nor dumped", n)
	}
	return nil
}
