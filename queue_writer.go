package dlqdump

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// The writer loop is the one goroutine that writes blocks to segments, syncs,
// seals and publishes them. Each of its calls into the sink goes through
// call, which lets Shutdown give up on a call that does not return: Shutdown
// then counts what the call decides as in doubt, and the loop, once the call
// returns, changes nothing and ends.

// Names of the sink calls, as Shutdown reports them.
const (
	opCreate   = "create"
	opHeader   = "write header"
	opWrite    = "write"
	opTruncate = "truncate"
	opSync     = "sync"
	opFooter   = "write footer"
	opCommit   = "commit"
	opRelease  = "release"
)

// errAbandoned unwinds the writer loop once Shutdown gave up on it.
var errAbandoned = errors.New("dlqdump: abandoned by Shutdown")

// call runs fn, a call into the sink, registered so that a Shutdown giving up
// meanwhile counts the records of doubt, and recs more, as in doubt. gone
// reports that Shutdown has counted the loop's state while fn ran: the loop
// must then change none of it and end (fn's error is still returned, so the
// caller knows whether a Commit took effect). Once Shutdown gave up, no new
// call starts, except releasing the open segment.
func (q *Queue) call(op string, doubt []*block, recs int, fn func() error) (gone bool, err error) {
	q.mu.Lock()
	if q.abandoned && op != opRelease {
		q.mu.Unlock()
		return false, errAbandoned
	}
	q.calling, q.doubt, q.doubtRecs = op, doubt, recs
	q.mu.Unlock()
	err = fn()
	q.mu.Lock()
	q.calling, q.doubt, q.doubtRecs = "", nil, 0
	gone = q.reported
	q.mu.Unlock()
	return gone, err
}

// writeLoop writes blocks, retries failures with backoff and runs the flush
// timer, until the Queue is closed and everything is published, or Shutdown
// gives up.
func (q *Queue) writeLoop() {
	defer close(q.loopDone)
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	var retrying bool
	for {
		select {
		case <-q.ready:
		case <-q.kick:
		case <-flush.C:
			q.flushTimerFired()
		case <-retry.C:
			retrying = false
		case <-q.quit:
			return
		}
		if !retrying {
			if err := q.process(); err != nil {
				if errors.Is(err, errAbandoned) {
					q.leave()
					return
				}
				q.fail(err)
				retrying = true
				retry.Reset(q.backoff())
			}
		}
		q.armFlushTimer(flush)
		q.mu.Lock()
		finished := q.closed && len(q.inflight) == 0 && q.sealing == nil
		q.mu.Unlock()
		if finished {
			return
		}
	}
}

// leave ends the loop after Shutdown gave up: if Shutdown counted the state
// while a call was running, the open segment is the loop's to release (closed
// for recovery, or aborted); otherwise Shutdown releases it.
func (q *Queue) leave() {
	q.mu.Lock()
	reported := q.reported
	q.mu.Unlock()
	if reported {
		q.releaseSegment()
	}
}

// releaseSegment gives up the open segment: closed without being committed,
// so that the sink's Recover publishes it on the next start, or aborted when
// the sink cannot do that.
func (q *Queue) releaseSegment() {
	s := q.seg
	if s == nil || s.committed {
		return
	}
	_, _ = q.call(opRelease, nil, 0, func() error {
		if c, ok := s.sw.(io.Closer); ok {
			return c.Close()
		}
		return s.sw.Abort()
	})
}

// backoff returns the wait before retrying a failed write: exponential from
// 50ms to 5s, jittered between half and all of it.
func (q *Queue) backoff() time.Duration {
	q.failures++
	d := 50 * time.Millisecond << min(q.failures-1, 7)
	return time.Duration(float64(min(d, 5*time.Second)) * (0.5 + 0.5*rand.Float64()))
}

// process writes every compressed block at the head of inflight, in order,
// seals segments as the blocks ask, and syncs for Durable callers.
func (q *Queue) process() error {
	for {
		if err := q.cutBack(); err != nil {
			return err
		}
		if b := q.sealing; b != nil {
			if err := q.seal(q.sealReason); err != nil {
				return err
			}
			q.sealing = nil
			q.progress()
			q.finish(b)
			continue
		}
		q.mu.Lock()
		if len(q.inflight) == 0 || !q.inflight[0].compressed {
			q.mu.Unlock()
			return q.syncOpen()
		}
		b := q.inflight[0]
		q.mu.Unlock()
		full, err := q.write(b)
		if err != nil {
			return err
		}
		q.progress()
		q.mu.Lock()
		q.inflight[0] = nil
		q.inflight = q.inflight[1:]
		q.pending.Add(-b.bytes)
		if full {
			q.since = q.oldestUnsealedLocked()
		}
		q.wakeLocked()
		q.mu.Unlock()
		q.mw.Pending(q.pending.Load())
		durable := q.c.Durable && (b.count > 0 || len(q.sinceSync) > 0)
		switch {
		case b.seal != "" || full:
			// Written: in Durable mode its bytes wait for the seal's
			// sync like the others; its callers wait for the Commit.
			if durable && b.count > 0 {
				q.sinceSync = append(q.sinceSync, b)
			}
			q.sealing, q.sealReason = b, cmp.Or(b.seal, FlushSize)
		case durable:
			q.sinceSync = append(q.sinceSync, b) // finished by the sync, in order
		default:
			q.finish(b)
		}
	}
}

// progress records a successful step: the backoff starts over.
func (q *Queue) progress() {
	q.failures = 0
	q.lastErr.Store(nil)
}

// write writes block b into the open segment, sealing the segment first if b
// does not fit and opening one if none is open. full reports that the
// segment cannot take even a small block any more.
func (q *Queue) write(b *block) (full bool, err error) {
	if b.count == 0 {
		return false, nil
	}
	if q.seg != nil && q.seg.w.SealedSizeOf(&b.eb) > int64(q.c.Capacity) {
		if err := q.seal(FlushSize); err != nil {
			return false, err
		}
		q.mu.Lock()
		q.since = b.eb.MinTime()
		q.mu.Unlock()
	}
	if q.seg == nil {
		if err := q.open(b.eb.MinTime()); err != nil {
			return false, err
		}
	}
	s := q.seg
	size := s.w.Size()
	gone, err := q.call(opWrite, []*block{b}, 0, func() error { return s.w.WriteBlock(&b.eb) })
	if gone {
		return false, errAbandoned
	}
	if err != nil {
		// The sink may hold part of the block, or all of it: cut it
		// off before anything else is written.
		s.cutTo, s.cutBlocks, s.requeue = size, []*block{b}, false
		return false, q.cutBackAfter(fmt.Errorf("%w: segment %s: %w", ErrSink, s.name, err))
	}
	b.written = true
	s.records = int(s.w.Records())
	return s.w.SealedSize(segment.BlockHeaderSize+16) > int64(q.c.Capacity), nil
}

// oldestUnsealedLocked returns the time of the oldest record not yet written.
func (q *Queue) oldestUnsealedLocked() int64 {
	for _, b := range q.inflight {
		if b.count > 0 {
			return b.first
		}
	}
	if q.cur.bb.Count() > 0 {
		return q.cur.bb.FirstTime()
	}
	return 0
}

// open starts a new segment whose first record entered the dump at first.
func (q *Queue) open(first int64) error {
	created := time.Unix(0, first)
	id := segment.NewID(created)
	name := segment.FileName(created, id)
	var sw sink.SegmentWriter
	gone, err := q.call(opCreate, nil, 0, func() (err error) {
		sw, err = q.c.Writer.Create(q.ctx, name)
		return err
	})
	if err != nil {
		if gone {
			return errAbandoned
		}
		return fmt.Errorf("%w: create segment %s: %w", ErrSink, name, err)
	}
	var w *segment.Writer
	if !gone {
		gone, err = q.call(opHeader, nil, 0, func() (err error) {
			opts, err := q.segmentOptions() // a new data key when encrypting
			if err != nil {
				return err
			}
			w, err = segment.NewWriter(sw, segment.Header{Codec: q.c.codec, DataVersion: uint64(q.c.Version), Created: created, ID: id}, opts)
			return err
		})
	}
	if gone || err != nil {
		_, _ = q.call(opRelease, nil, 0, sw.Abort)
		if gone || errors.Is(err, errAbandoned) {
			return errAbandoned
		}
		return fmt.Errorf("%w: segment %s: %w", ErrSink, name, err)
	}
	q.seg = &openSegment{name: name, sw: sw, w: w, opened: time.Now(), synced: w.Size(), cutTo: -1}
	return nil
}

// seal writes the open segment's footer and publishes it. In Durable mode the
// blocks are synced first.
func (q *Queue) seal(reason string) error {
	s := q.seg
	if s == nil {
		return nil
	}
	if err := q.cutBack(); err != nil {
		return err
	}
	if !s.footer {
		if err := q.syncOpen(); err != nil {
			return err
		}
		size := s.w.Size()
		gone, err := q.call(opFooter, nil, 0, s.w.Close)
		if gone {
			return errAbandoned
		}
		if err != nil {
			s.cutTo, s.cutBlocks, s.requeue = size, nil, false
			return q.cutBackAfter(fmt.Errorf("%w: segment %s: %w", ErrSink, s.name, err))
		}
		s.footer = true
	}
	start := time.Now()
	records := s.records
	s.tried = true
	gone, err := q.call(opCommit, nil, records, func() error { return s.sw.Commit(q.ctx) })
	if err == nil {
		s.committed = true
		q.segments.Add(1) // true even if Shutdown counted it in doubt meanwhile
	}
	if gone {
		return errAbandoned
	}
	if err != nil {
		return fmt.Errorf("%w: publish segment %s: %w", ErrSink, s.name, err)
	}
	q.seg = nil
	if reason != FlushSize {
		// Sealed by FlushInterval, Flush or Close: not in a burst.
		q.mu.Lock()
		q.trimFreeLocked()
		q.mu.Unlock()
	}
	if q.watcher != nil {
		q.held = append(q.held, records)
		if h := q.watcher.WatchBacklog().Segments; len(q.held) > h {
			q.held = append(q.held[:0], q.held[len(q.held)-h:]...)
		}
	}
	q.mw.Flush(reason, records, int(s.w.Size()), time.Since(start))
	q.log.Debug("segment published", slog.String("segment", s.name), slog.String("reason", reason),
		slog.Int("records", records), slog.Int64("bytes", s.w.Size()))
	return nil
}

// syncOpen syncs the open segment and releases the Durable callers whose
// blocks are now on stable storage; the block being sealed is released by
// its Commit.
func (q *Queue) syncOpen() error {
	if len(q.sinceSync) == 0 {
		return nil
	}
	if err := q.cutBack(); err != nil {
		return err
	}
	s := q.seg
	gone, err := q.call(opSync, nil, 0, s.sw.Sync)
	if gone {
		return errAbandoned
	}
	if err != nil {
		return q.resync(err)
	}
	s.synced = s.w.Size()
	for _, b := range q.sinceSync {
		if b != q.sealing {
			q.finish(b)
		}
	}
	clear(q.sinceSync)
	q.sinceSync = q.sinceSync[:0]
	q.mu.Lock()
	if q.cur.waiters > 0 {
		q.cutLocked("")
	} else {
		q.syncing = false
	}
	q.mu.Unlock()
	return nil
}

// resync handles a failed sync. After a failed fsync the bytes written since
// the last good one are in doubt, and syncing again may report success without
// them, so the segment is cut back to its last synced size and every block
// written since, the one being sealed included, is put back at the head of
// the line to be written again.
func (q *Queue) resync(cause error) error {
	s := q.seg
	blocks := append([]*block(nil), q.sinceSync...)
	if b := q.sealing; b != nil && !b.written {
		blocks = append(blocks, b) // an empty seal request: again after them
	}
	q.sealing = nil
	clear(q.sinceSync)
	q.sinceSync = q.sinceSync[:0]
	err := fmt.Errorf("%w: sync segment %s: %w", ErrSink, s.name, cause)
	if terr := s.w.Truncate(s.synced); terr != nil {
		// Cannot happen: a sync comes between blocks.
		return errors.Join(err, terr)
	}
	s.records = int(s.w.Records())
	s.cutTo, s.cutBlocks, s.requeue = s.synced, blocks, true
	return q.cutBackAfter(err)
}

// cutBackAfter tries the truncation planned after err and returns err, with
// the truncation's error if it failed too.
func (q *Queue) cutBackAfter(err error) error {
	if cerr := q.cutBack(); cerr != nil {
		if errors.Is(cerr, errAbandoned) {
			return errAbandoned
		}
		return errors.Join(err, cerr)
	}
	return err
}

// cutBack truncates the open segment as planned after a failure (cutTo), and
// puts the blocks to write again back at the head of the line.
func (q *Queue) cutBack() error {
	s := q.seg
	if s == nil || s.cutTo < 0 {
		return nil
	}
	gone, err := q.call(opTruncate, s.cutBlocks, 0, func() error { return s.sw.Truncate(s.cutTo) })
	if gone {
		return errAbandoned
	}
	if err != nil {
		return fmt.Errorf("%w: segment %s: truncate to %d bytes after a failure: %w", ErrSink, s.name, s.cutTo, err)
	}
	if s.requeue {
		q.mu.Lock()
		for _, b := range s.cutBlocks {
			b.written = false
			q.pending.Add(b.bytes)
		}
		q.inflight = append(s.cutBlocks, q.inflight...)
		q.mu.Unlock()
	}
	s.cutTo, s.cutBlocks, s.requeue = -1, nil, false
	return nil
}

// finish completes a block: wakes its waiters or recycles it.
func (q *Queue) finish(b *block) {
	q.mu.Lock()
	if b.done != nil {
		// Waiters read b.err: leave it to the garbage collector.
		q.bufBytes -= int64(b.eb.Cap())
		q.mu.Unlock()
		close(b.done)
		return
	}
	q.putBlockLocked(b)
	q.mu.Unlock()
}

func (q *Queue) fail(err error) {
	q.lastErr.Store(&err)
	q.mw.Fail("write")
	q.log.Warn("writing the dump failed; the data stays in memory and will be retried", slog.Any("error", err))
}

// flushTimerFired seals the open segment if its oldest record has waited
// FlushInterval.
func (q *Queue) flushTimerFired() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.since != 0 && time.Since(time.Unix(0, q.since)) >= q.c.FlushInterval {
		q.cutLocked(FlushInterval)
		q.since = 0
	}
}

func (q *Queue) armFlushTimer(t *time.Timer) {
	q.mu.Lock()
	since := q.since
	q.mu.Unlock()
	t.Stop()
	if since == 0 {
		return
	}
	t.Reset(max(time.Until(time.Unix(0, since).Add(q.c.FlushInterval)), 0))
}
