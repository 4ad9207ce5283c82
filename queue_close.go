package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// shutdownGrace is how long Shutdown, once its context is done, still waits
// for a sink call (or the Writer's Close) to return before it answers
// without it: the "little" by which Shutdown may pass its deadline. A call
// that honours the context it was given returns within it.
const shutdownGrace = 100 * time.Millisecond

// Flush seals the open segment with everything enqueued before the call and
// waits until it is stored where readers find it (for a Writer that uploads
// in the background, until it is uploaded: sink.Flusher), or until ctx is
// done; then the error wraps ErrNotStored and says what is missing.
func (q *Queue) Flush(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	b := q.cutLocked(FlushManual)
	q.since = 0
	q.mu.Unlock()
	select {
	case <-b.done:
		if b.err != nil {
			return b.err
		}
	case <-ctx.Done():
		err := fmt.Errorf("dlqdump: flush: %w: the segment is not published yet: %w", ErrNotStored, ctx.Err())
		if last := q.lastErr.Load(); last != nil {
			err = fmt.Errorf("%w; last sink error: %w", err, *last)
		}
		return err
	}
	if q.flusher != nil {
		if err := callBounded(ctx, q.flusher.Flush); err != nil {
			return fmt.Errorf("dlqdump: flush: %w: %w", ErrNotStored, err)
		}
	}
	return nil
}

// Close flushes everything, publishes the last segment, waits until every
// segment is stored where readers find it (closing the Writer, see
// sink.Closer) and stops the Queue, waiting as long as that takes (see
// Shutdown to bound it). A second call returns ErrClosed.
func (q *Queue) Close() error {
	return q.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx. It returns nil only when every record
// accepted is stored where readers find it. If ctx ends first, the Queue
// stops anyway, within a moment (shutdownGrace) even if a sink call never
// returns, and the error is a *ShutdownError counting the records not stored
// by what became of them: not written, written but not synced (the next
// start publishes them), held by the Writer, or in doubt. Durable callers
// still waiting get the error of their own record (ErrNotWritten,
// ErrNotSynced, ErrInDoubt, each wrapping ErrClosed too).
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.closed = true
	b := q.cutLocked(FlushClose)
	q.wakeLocked()
	q.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return q.abandon(ctx)
	}
	select {
	case <-q.loopDone:
	case <-ctx.Done():
		return q.abandon(ctx)
	}
	q.stop()
	se := &ShutdownError{}
	if err := q.closeWriter(ctx); err != nil {
		se.Err = err
		q.countHeld(se, err)
		return q.shutdownErr(se)
	}
	return nil
}

// stop stops the goroutines that do not stop by themselves.
func (q *Queue) stop() {
	q.closeOnce.Do(func() { close(q.quit); q.cancel() })
	q.wg.Wait()
}

// abandon stops the Queue when Shutdown's context ended first, and counts
// what is not stored. The writer loop, if it is in a sink call that does not
// return within shutdownGrace, is left there: its state is counted as it
// stands, the call's records as in doubt, and the loop ends when the call
// returns, changing nothing.
func (q *Queue) abandon(ctx context.Context) error {
	q.mu.Lock()
	q.abandoned = true
	q.mu.Unlock()
	q.stop() // also cancels the context of the sink calls
	var se *ShutdownError
	parked := false
	select {
	case <-q.loopDone:
	case <-time.After(shutdownGrace):
		q.mu.Lock()
		if q.calling != "" {
			// Counted now, in the same critical section: the loop,
			// back from its call, sees reported and changes nothing.
			parked, q.reported = true, true
			se = q.accountLocked()
		}
		q.mu.Unlock()
		if !parked {
			<-q.loopDone // between calls: it starts none and ends
		}
	}
	if !parked {
		q.mu.Lock()
		se = q.accountLocked()
		q.mu.Unlock()
		// The loop ended: the open segment is Shutdown's to release.
		released := make(chan struct{})
		go func() {
			defer close(released)
			q.releaseSegment()
		}()
		select {
		case <-released:
		case <-time.After(shutdownGrace):
		}
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	werr := q.closeWriter(gctx)
	q.countHeld(se, werr)
	se.Err = ctx.Err()
	if werr != nil {
		se.Err = fmt.Errorf("%w; writer: %w", se.Err, werr)
	}
	if se.NotWritten+se.NotSynced+se.Held+se.InDoubt == 0 && werr == nil {
		return nil // everything was stored after all
	}
	return q.shutdownErr(se)
}

func (q *Queue) shutdownErr(se *ShutdownError) error {
	if last := q.lastErr.Load(); last != nil {
		if se.Err == nil {
			se.Err = fmt.Errorf("last sink error: %w", *last)
		} else {
			se.Err = fmt.Errorf("%w; last sink error: %w", se.Err, *last)
		}
	}
	q.mw.Fail("shutdown")
	q.log.Error("shutdown before the dump was stored", slog.Int("not_written", se.NotWritten), slog.Int("not_synced", se.NotSynced),
		slog.Int("held", se.Held), slog.Int("in_doubt", se.InDoubt), slog.Any("error", se))
	return se
}

// accountLocked counts the records accepted and not stored by what became of
// them, and answers every Durable caller still waiting (and Flush) with its
// own record's fate. The writer loop has ended or is parked in a sink call.
func (q *Queue) accountLocked() *ShutdownError {
	se := &ShutdownError{InDoubt: q.doubtRecs}
	doubt := map[*block]bool{}
	for _, b := range q.doubt {
		doubt[b] = true
	}
	s := q.seg
	commitInDoubt := q.calling == opCommit
	var openKept bool // the open segment is left for recovery
	if s != nil {
		for _, b := range s.cutBlocks {
			doubt[b] = true
		}
		_, openKept = s.sw.(io.Closer)
		if !commitInDoubt && !s.committed {
			if n := s.records; openKept {
				se.NotSynced += n
			} else {
				se.NotWritten += n
			}
		}
	}
	for b := range doubt {
		se.InDoubt += b.count
	}
	var (
		opName     = q.calling
		notWritten = fmt.Errorf("%w: %w: the queue was shut down before the record was written", ErrClosed, ErrNotWritten)
		dropped    = fmt.Errorf("%w: %w: the queue was shut down before the record was synced, and the sink cannot recover the open segment holding it", ErrClosed, ErrNotWritten)
		inDoubt    = fmt.Errorf("%w: %w: the queue was shut down while the sink call (%s) deciding the record's fate had not returned", ErrClosed, ErrInDoubt, opName)
		unpub      = fmt.Errorf("%w: %w: the queue was shut down before the segment was published", ErrClosed, ErrNotStored)
		notSynced  error
	)
	if s != nil {
		notSynced = fmt.Errorf("%w: %w: the queue was shut down before the record was synced; it is in the open segment %s, which the next start publishes", ErrClosed, ErrNotSynced, s.name)
	}
	seen := map[*block]bool{}
	answer := func(b *block) {
		if seen[b] {
			return
		}
		seen[b] = true
		var err error
		switch {
		case b.count == 0:
			err = unpub
		case doubt[b], b.written && commitInDoubt:
			err = inDoubt
		case b.written && openKept:
			err = notSynced
		case b.written:
			err = dropped
		default:
			se.NotWritten += b.count
			err = notWritten
		}
		if b.done != nil {
			b.err = err
			close(b.done)
		}
	}
	for _, b := range q.sinceSync {
		answer(b)
	}
	if q.sealing != nil {
		answer(q.sealing)
	}
	if s != nil {
		for _, b := range s.cutBlocks {
			answer(b)
		}
	}
	for _, b := range q.inflight {
		answer(b)
	}
	q.inflight, q.work = nil, nil
	return se
}

// countHeld adds to se the records in committed segments that the Writer
// holds, not stored, as it says after its Close (sink.BacklogWatcher): the
// last of the segments this Queue committed, since it stores them in order.
// Those held in memory are lost once the Writer's Close returned; if it has
// not, the Writer may still store them: they are in doubt.
func (q *Queue) countHeld(se *ShutdownError, werr error) {
	if q.watcher == nil {
		return
	}
	bl := q.watcher.WatchBacklog()
	n := min(max(bl.Segments, 0), len(q.held))
	var recs int
	for _, r := range q.held[len(q.held)-n:] {
		recs += r
	}
	switch {
	case bl.Persistent:
		se.Held += recs
		se.HeldSegments += n
	case errors.Is(werr, errNoAnswer):
		se.InDoubt += recs
	default:
		se.NotWritten += recs
	}
}

// closeWriter closes the Writer (sink.Closer), or waits for its uploads
// (sink.Flusher), bounded by ctx.
func (q *Queue) closeWriter(ctx context.Context) error {
	switch {
	case q.closer != nil:
		return callBounded(ctx, q.closer.Close)
	case q.flusher != nil:
		return callBounded(ctx, q.flusher.Flush)
	}
	return nil
}

// callBounded returns fn(ctx)'s error, or, if fn has not returned
// shutdownGrace after ctx is done, ctx's error (fn goes on alone).
func callBounded(ctx context.Context, fn func(context.Context) error) error {
	if ctx.Done() == nil {
		return fn(ctx)
	}
	res := make(chan error, 1)
	go func() { res <- fn(ctx) }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(shutdownGrace)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
		return fmt.Errorf("%w: %w", errNoAnswer, ctx.Err())
	}
}

// errNoAnswer: the Writer had not returned shutdownGrace after the deadline.
var errNoAnswer = fmt.Errorf("the Writer had not returned %s after the deadline", shutdownGrace)
