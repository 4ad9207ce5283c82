package dlqdump

import (
	"github.com/dlqdump/dlqdump/internal/errs"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
)

// shutdownGrace is how long Shutdown, once its context is done, still waits
// for the writer loop's sink call, the release of the open segment and the
// Writer's Close, each, before it answers without them: Shutdown returns at
// most three times that past its deadline. A call that honours the context
// it was given returns within it.
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
// stops anyway, at most 300ms later even if a sink call never returns (the
// writer goroutine then ends when that call returns), and the error is a *ShutdownError counting the records not stored
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
	werr := q.closeWriter(ctx) // ctx is done: the Writer gives up at once, or shutdownGrace later it is given up on
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
	// The open segment's records are in doubt while its Commit runs, and
	// after a Commit that failed, which may have taken effect (the sink
	// contract lets a retry find it done), unless the segment is left for
	// recovery: then they are stored once either way.
	commitInDoubt := q.calling == opCommit
	var openKept bool // the open segment is left for recovery
	if s != nil {
		for _, b := range s.cutBlocks {
			doubt[b] = true
		}
		_, openKept = s.sw.(io.Closer)
		commitInDoubt = commitInDoubt || s.tried && !s.committed && !openKept
		if !commitInDoubt && !s.committed {
			if n := s.records; openKept {
				se.NotSynced += n
			} else {
				se.NotWritten += n
			}
		} else if commitInDoubt && q.calling != opCommit {
			se.InDoubt += s.records
		}
	}
	q.commitInDoubt = commitInDoubt
	for b := range doubt {
		se.InDoubt += b.count
	}
	var (
		opName     = q.calling
		notWritten = errs.Chain(ErrClosed, ErrNotWritten, errors.New("the queue was shut down before the record was written"))
		dropped    = errs.Chain(ErrClosed, ErrNotWritten, errors.New("the queue was shut down before the record was synced, and the sink cannot recover the open segment holding it"))
		inDoubt    = errs.Chain(ErrClosed, ErrInDoubt, fmt.Errorf("the queue was shut down while the sink call (%s) deciding the record's fate had not returned", opName))
		unpub      = errs.Chain(ErrClosed, ErrNotStored, errors.New("the queue was shut down before the segment was published"))
		notSynced  error
	)
	if s != nil {
		notSynced = errs.Chain(ErrClosed, ErrNotSynced, fmt.Errorf("the queue was shut down before the record was synced; it is in the open segment %s, which the next start publishes", s.name))
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
// Those on disk are held for the next start. Those in memory are lost once
// the Writer stopped, except the oldest ones whose upload was under way
// (Backlog.Uncertain), in doubt; until it stops (its Close has not returned,
// or returned without stopping it) it may still store them all: in doubt. A Commit in doubt may have added a
// segment to the backlog that this Queue does not count as committed: then
// the oldest of those it does may be stored instead, in doubt too.
func (q *Queue) countHeld(se *ShutdownError, werr error) {
	if q.watcher == nil {
		return
	}
	bl := q.watcher.WatchBacklog()
	held := q.held[len(q.held)-min(max(bl.Segments, 0), len(q.held)):]
	unsure := max(bl.Uncertain, 0)
	if q.commitInDoubt {
		unsure++
	}
	if !bl.Stopped || errors.Is(werr, errNoAnswer) {
		unsure = len(held)
	}
	for i, r := range held {
		switch {
		case bl.Persistent:
			se.Held += r
			se.HeldSegments++
		case i < unsure:
			se.InDoubt += r
		default:
			se.NotWritten += r
		}
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
