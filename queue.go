package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump/segment"
)

// Queue is the dumper: a queue.Interface (github.com/koykov/queue) that
// writes every item it is given into segments through Config.Writer. Set it as
// the DLQ of a koykov queue, or call Enqueue from any code that dead-letters.
//
// Enqueue encodes the item and appends it to an in-memory block under a short
// lock; it does no I/O. Full blocks are compressed by Config.Compressors
// goroutines and written, in order, by one writer goroutine, which seals and
// publishes a segment when it reaches Config.Capacity, Config.FlushInterval
// after its first record, on Flush and on Close.
type Queue struct {
	c       *queueConfig
	mw      MetricsWriter
	log     *slog.Logger
	backlog Backlogger

	mu       sync.Mutex
	closed   bool
	cur      *block   // the block being filled
	cutSeq   uint64   // sequence number of the next cut block
	since    int64    // time of the oldest record not in a sealed segment, 0 if none
	inflight []*block // cut and not yet written, in order
	work     []*block // cut and not yet taken by a compressor
	syncing  bool     // Durable: a cut for waiting callers is in flight
	space    chan struct{}
	waiting  int      // callers waiting in backpressure
	free     []*block // finished blocks kept for reuse (their encoded buffers)
	rawFree  [][]byte // raw buffers of compressed blocks, for new blocks
	maxFree  int

	pending  atomic.Int64 // bytes accepted, not yet written
	records  atomic.Uint64
	segments atomic.Uint64
	lastErr  atomic.Pointer[error]

	workReady chan struct{}   // compressors: a block was cut
	ready     chan struct{}   // writer loop: a block was compressed
	kick      chan struct{}   // writer loop: a segment started, arm the flush timer
	quit      chan struct{}   // stop now (Shutdown deadline passed)
	ctx       context.Context // for sink calls; cancelled with quit
	cancel    context.CancelFunc
	loopDone  chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once

	// owned by the writer loop
	seg      *openSegment
	unsynced []*block
	failures int
}

var _ queue.Interface = (*Queue)(nil)

// block is a batch of records on its way to a segment.
type block struct {
	seq        uint64
	bb         segment.BlockBuilder // emptied once compressed: its buffer is reused
	eb         segment.EncodedBlock
	count      int    // records, set when cut
	first      int64  // time of the first record, set when cut
	bytes      int64  // pending bytes it accounts for
	seal       string // flush reason: seal the segment after this block
	compressed bool
	written    bool
	waiters    int           // Durable callers waiting for it
	done       chan struct{} // closed when handled, if anyone waits
	err        error         // set before done is closed when abandoned
}

// openSegment is the segment the writer loop is appending to.
type openSegment struct {
	name   string
	sw     SegmentWriter
	w      *segment.Writer
	opened time.Time
	footer bool  // the footer is written, Commit pending
	synced int64 // size at the last successful Sync
}

// NewQueue validates the config and starts a Queue. If the Writer implements
// Recoverer, segments left open by a crash are sealed and published first.
func NewQueue(config *Config) (*Queue, error) {
	c, err := config.queueConfig()
	if err != nil {
		return nil, err
	}
	q := &Queue{
		c:         c,
		mw:        c.MetricsWriter,
		log:       c.Logger.With(slog.String("component", "dlqdump.Queue")),
		space:     make(chan struct{}),
		workReady: make(chan struct{}, c.Compressors),
		ready:     make(chan struct{}, 1),
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		loopDone:  make(chan struct{}),
	}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.backlog, _ = c.Writer.(Backlogger)
	if err := recoverSink(c.Writer, q.log, q.mw); err != nil {
		return nil, err
	}
	// Enough to cycle blocks through the compressors without allocating;
	// more would only hold memory beyond MaxPending after a burst.
	q.maxFree = 2*c.Compressors + 4
	q.cur = q.newBlockLocked()
	for range c.Compressors {
		comp, err := segment.NewCompressor(c.codec, c.CompressionLevel)
		if err != nil {
			return nil, fmt.Errorf("%w: CompressionLevel: %w", ErrConfig, err)
		}
		q.wg.Add(1)
		go q.compressLoop(comp)
	}
	go q.writeLoop()
	return q, nil
}

// recoverSink seals and publishes the segments a crash left open in sink,
// when it can (Recoverer), logging and counting each.
func recoverSink(sink any, log *slog.Logger, mw MetricsWriter) error {
	rc, ok := sink.(Recoverer)
	if !ok {
		return nil
	}
	names, err := rc.Recover(context.Background())
	for _, name := range names {
		log.Info("recovered a segment left open by a crash", slog.String("segment", name))
		mw.Flush(FlushRecover, 0, 0, 0)
	}
	if err != nil {
		mw.Fail("recover")
		return fmt.Errorf("%w: recover unfinished segments: %w", ErrSink, err)
	}
	return nil
}

// newBlockLocked returns an empty block, reusing finished ones' buffers.
func (q *Queue) newBlockLocked() *block {
	var b *block
	if n := len(q.free); n > 0 {
		b = q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		*b = block{eb: b.eb}
	} else {
		b = &block{}
	}
	var raw []byte
	if n := len(q.rawFree); n > 0 {
		raw = q.rawFree[n-1]
		q.rawFree[n-1] = nil
		q.rawFree = q.rawFree[:n-1]
	} else {
		raw = make([]byte, 0, q.c.blockSize+q.c.blockSize/8)
	}
	b.bb.Reset(raw)
	return b
}

// Enqueue dumps x. x may be any item the Encoder takes, a queue.Job or
// *queue.Job (its Payload is dumped), an Envelope or *Envelope (its Headers
// are stored beside its Item), or a HeaderCarrier. Enqueue does no I/O; it
// waits only when the bytes not yet written exceed Config.MaxPending (for at
// most Config.EnqueueTimeout, then ErrBackpressure) and, in Durable mode, for
// the sync. An error means the item was not dumped, except ErrNotDurable.
func (q *Queue) Enqueue(x any) error {
	item, headers := unwrap(x)
	if q.c.Source != "" {
		if _, ok := headers[HeaderSource]; !ok {
			headers = withHeader(headers, HeaderSource, q.c.Source)
		}
	}
	sp := scratchPool.Get().(*[]byte)
	defer putScratch(sp)
	body := segment.AppendHeaders((*sp)[:0], headers)
	body, err := q.c.Encoder.Encode(body, item)
	*sp = body
	if err != nil {
		q.mw.Fail("encode")
		return fmt.Errorf("%w: %w", ErrEncode, err)
	}
	if len(body) > segment.MaxRecordSize {
		q.mw.Fail("too_large")
		return fmt.Errorf("%w: %T encodes to %d bytes, the cap is %d", ErrTooLarge, item, len(body), segment.MaxRecordSize)
	}
	size := int64(segment.RecordSize(len(body)))
	now := time.Now().UnixNano()

	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if err := q.waitRoomLocked(size); err != nil {
		q.mu.Unlock()
		q.mw.Fail("backpressure")
		return err
	}
	b := q.cur
	if b.bb.Count() > 0 && b.bb.Len()+int(size) > q.c.blockSize {
		q.cutLocked("")
		b = q.cur
	}
	b.bb.Add(now, body)
	b.bytes += size
	q.pending.Add(size)
	if q.since == 0 {
		q.since = now
		select {
		case q.kick <- struct{}{}:
		default:
		}
	}
	var done chan struct{}
	if q.c.Durable {
		b.waiters++
		if b.done == nil {
			b.done = make(chan struct{})
		}
		done = b.done
		if !q.syncing {
			q.syncing = true
			q.cutLocked("")
		}
	}
	if b.bb.Len() >= q.c.blockSize && b == q.cur {
		q.cutLocked("")
	}
	q.mu.Unlock()
	q.records.Add(1)
	q.mw.Dump(len(body))
	if done != nil {
		return q.waitDurable(b, done)
	}
	return nil
}

// waitRoomLocked waits until size more bytes fit under MaxPending. A record is
// always accepted when nothing is pending, however large.
func (q *Queue) waitRoomLocked(size int64) error {
	limit := int64(q.c.MaxPending)
	used := func() int64 {
		n := q.pending.Load()
		if q.backlog != nil {
			n += q.backlog.Backlog()
		}
		return n
	}
	if n := used(); n == 0 || n+size <= limit {
		return nil
	}
	if q.c.EnqueueTimeout < 0 {
		return q.backpressureErr(used(), 0)
	}
	t := time.NewTimer(q.c.EnqueueTimeout)
	defer t.Stop()
	for {
		n := used()
		if n == 0 || n+size <= limit {
			return nil
		}
		ch := q.space
		q.waiting++
		q.mu.Unlock()
		var timedOut bool
		select {
		case <-ch:
		case <-t.C:
			timedOut = true
		}
		q.mu.Lock()
		q.waiting--
		if q.closed {
			return ErrClosed
		}
		if timedOut {
			if n := used(); n == 0 || n+size <= limit {
				return nil
			}
			return q.backpressureErr(used(), q.c.EnqueueTimeout)
		}
	}
}

func (q *Queue) backpressureErr(used int64, waited time.Duration) error {
	err := fmt.Errorf("%w: %d bytes pending, MaxPending is %s, waited %s", ErrBackpressure, used, q.c.MaxPending, waited.Round(time.Millisecond))
	if last := q.lastErr.Load(); last != nil {
		err = fmt.Errorf("%w; last sink error: %w", err, *last)
	}
	return err
}

func (q *Queue) waitDurable(b *block, done chan struct{}) error {
	var timeout <-chan time.Time
	if q.c.EnqueueTimeout > 0 {
		t := time.NewTimer(q.c.EnqueueTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-done:
		return b.err
	case <-timeout:
	}
	err := fmt.Errorf("%w: not synced within %s", ErrNotDurable, q.c.EnqueueTimeout)
	if last := q.lastErr.Load(); last != nil {
		err = fmt.Errorf("%w; last sink error: %w", err, *last)
	}
	q.mw.Fail("not_durable")
	return err
}

// cutLocked hands the current block to the compressors, marked to seal the
// segment after it when reason is not empty, and starts a new block. It
// returns the cut block.
func (q *Queue) cutLocked(reason string) *block {
	b := q.cur
	b.seq = q.cutSeq
	b.count, b.first = b.bb.Count(), b.bb.FirstTime()
	q.cutSeq++
	b.seal = reason
	if reason != "" && b.done == nil {
		b.done = make(chan struct{})
	}
	q.inflight = append(q.inflight, b)
	q.work = append(q.work, b)
	q.cur = q.newBlockLocked()
	select {
	case q.workReady <- struct{}{}:
	default:
	}
	return b
}

// compressLoop compresses cut blocks until the queue stops.
func (q *Queue) compressLoop(comp *segment.Compressor) {
	defer q.wg.Done()
	for {
		select {
		case <-q.workReady:
		case <-q.quit:
			return
		}
		for {
			q.mu.Lock()
			if len(q.work) == 0 {
				q.mu.Unlock()
				break
			}
			b := q.work[0]
			q.work[0] = nil
			q.work = q.work[1:]
			if len(q.work) > 0 {
				select {
				case q.workReady <- struct{}{}: // wake another compressor
				default:
				}
			}
			q.mu.Unlock()
			if b.bb.Count() > 0 {
				comp.Encode(&b.eb, &b.bb)
			}
			q.mu.Lock()
			b.compressed = true
			// The raw bytes are not needed any more: only the compressed
			// ones wait for the writer, so memory follows MaxPending.
			if raw := b.bb.Raw(); len(q.rawFree) < q.maxFree && cap(raw) <= 2*q.c.blockSize {
				q.rawFree = append(q.rawFree, raw)
			}
			b.bb.Reset(nil)
			q.mu.Unlock()
			select {
			case q.ready <- struct{}{}:
			default:
			}
		}
	}
}

// writeLoop is the one goroutine that writes blocks to segments, syncs, seals
// and publishes them, and runs the flush timer.
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
				retrying = true
				retry.Reset(q.backoff())
			}
		}
		q.armFlushTimer(flush)
		q.mu.Lock()
		finished := q.closed && len(q.inflight) == 0
		q.mu.Unlock()
		if finished {
			return
		}
	}
}

// backoff returns the wait before retrying a failed write: exponential from
// 50ms to 5s, jittered between half and all of it.
func (q *Queue) backoff() time.Duration {
	q.failures++
	d := 50 * time.Millisecond << min(q.failures-1, 7)
	return time.Duration(float64(min(d, 5*time.Second)) * (0.5 + 0.5*rand.Float64()))
}

// process writes every compressed block at the head of inflight, in order.
func (q *Queue) process() error {
	for {
		q.mu.Lock()
		if len(q.inflight) == 0 || !q.inflight[0].compressed {
			q.mu.Unlock()
			if err := q.syncWaiters(); err != nil {
				q.fail(err)
				return err
			}
			return nil
		}
		b := q.inflight[0]
		q.mu.Unlock()
		if err := q.handle(b); err != nil {
			q.fail(err)
			return err
		}
		q.failures = 0
		q.lastErr.Store(nil)
		q.mu.Lock()
		q.inflight[0] = nil
		q.inflight = q.inflight[1:]
		if b.bytes > 0 {
			q.pending.Add(-b.bytes)
		}
		if q.waiting > 0 {
			close(q.space)
			q.space = make(chan struct{})
		}
		q.mu.Unlock()
		q.mw.Pending(q.pending.Load())
		if b.waiters > 0 {
			q.unsynced = append(q.unsynced, b)
			continue
		}
		if err := q.syncWaiters(); err != nil { // blocks after b must not finish before it
			q.fail(err)
			return err
		}
		q.finish(b)
	}
}

// handle writes block b into the open segment, opening and sealing segments
// as needed. It can be called again for the same block after a failure.
func (q *Queue) handle(b *block) error {
	if b.count > 0 && !b.written {
		if q.seg != nil && q.seg.w.SealedSize(b.eb.Len()) > int64(q.c.Capacity) {
			if err := q.seal(FlushSize); err != nil {
				return err
			}
			q.mu.Lock()
			q.since = b.eb.MinTime()
			q.mu.Unlock()
		}
		if q.seg == nil {
			if err := q.open(b.eb.MinTime()); err != nil {
				return err
			}
		}
		if err := q.seg.w.WriteBlock(&b.eb); err != nil {
			if terr := q.seg.sw.Truncate(q.seg.w.Size()); terr != nil {
				err = errors.Join(err, fmt.Errorf("truncate after failed write: %w", terr))
			}
			return fmt.Errorf("%w: segment %s: %w", ErrSink, q.seg.name, err)
		}
		b.written = true
		// Seal now if not even a minimal block fits any more.
		if q.seg.w.SealedSize(segment.BlockHeaderSize+16) > int64(q.c.Capacity) {
			if err := q.seal(FlushSize); err != nil {
				return err
			}
			q.mu.Lock()
			q.since = q.oldestUnsealedLocked()
			q.mu.Unlock()
		}
	}
	if b.seal != "" && q.seg != nil {
		return q.seal(b.seal)
	}
	return nil
}

// oldestUnsealedLocked returns the time of the oldest record not yet written.
func (q *Queue) oldestUnsealedLocked() int64 {
	for _, b := range q.inflight[1:] {
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
	sw, err := q.c.Writer.Create(q.ctx, name)
	if err != nil {
		return fmt.Errorf("%w: create segment %s: %w", ErrSink, name, err)
	}
	w, err := segment.NewWriter(sw, segment.Header{Codec: q.c.codec, DataVersion: uint64(q.c.Version), Created: created, ID: id}, nil)
	if err != nil {
		_ = sw.Abort()
		return fmt.Errorf("%w: segment %s: %w", ErrSink, name, err)
	}
	q.seg = &openSegment{name: name, sw: sw, w: w, opened: time.Now(), synced: w.Size()}
	return nil
}

// seal writes the open segment's footer and publishes it.
func (q *Queue) seal(reason string) error {
	s := q.seg
	if s == nil {
		return nil
	}
	if !s.footer {
		if q.c.Durable || len(q.unsynced) > 0 {
			if err := q.syncWaiters(); err != nil {
				return err
			}
		}
		size := s.w.Size()
		if err := s.w.Close(); err != nil {
			if terr := s.sw.Truncate(size); terr != nil {
				err = errors.Join(err, fmt.Errorf("truncate after failed footer write: %w", terr))
			}
			return fmt.Errorf("%w: segment %s: %w", ErrSink, s.name, err)
		}
		s.footer = true
	}
	start := time.Now()
	if err := s.sw.Commit(q.ctx); err != nil {
		return fmt.Errorf("%w: publish segment %s: %w", ErrSink, s.name, err)
	}
	q.seg = nil
	q.segments.Add(1)
	q.mw.Flush(reason, int(s.w.Records()), int(s.w.Size()), time.Since(start))
	q.log.Debug("segment published", slog.String("segment", s.name), slog.String("reason", reason),
		slog.Uint64("records", s.w.Records()), slog.Int64("bytes", s.w.Size()))
	return nil
}

// syncWaiters syncs the open segment and releases the Durable callers whose
// blocks are now on stable storage.
func (q *Queue) syncWaiters() error {
	if len(q.unsynced) == 0 {
		return nil
	}
	if q.seg != nil {
		if err := q.seg.sw.Sync(); err != nil {
			return q.resync(err)
		}
		q.seg.synced = q.seg.w.Size()
	}
	for _, b := range q.unsynced {
		q.finish(b)
	}
	clear(q.unsynced)
	q.unsynced = q.unsynced[:0]
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
// them, so the segment is cut back to the last synced size and the unsynced
// blocks are put back at the head of the line to be written again.
func (q *Queue) resync(cause error) error {
	s := q.seg
	err := fmt.Errorf("%w: sync segment %s: %w", ErrSink, s.name, cause)
	if terr := s.w.Truncate(s.synced); terr != nil {
		err = errors.Join(err, terr)
	} else if terr := s.sw.Truncate(s.synced); terr != nil {
		err = errors.Join(err, fmt.Errorf("truncate after failed sync: %w", terr))
	}
	q.mu.Lock()
	for _, b := range q.unsynced {
		b.written = false
		q.pending.Add(b.bytes)
	}
	q.inflight = append(slices.Clone(q.unsynced), q.inflight...)
	q.mu.Unlock()
	clear(q.unsynced)
	q.unsynced = q.unsynced[:0]
	return err
}

// finish completes a block: wakes its waiters or recycles it.
func (q *Queue) finish(b *block) {
	if b.done != nil {
		close(b.done)
		return // waiters read b.err; leave it to the garbage collector
	}
	q.mu.Lock()
	if len(q.free) < q.maxFree && b.eb.Cap() <= 2*q.c.blockSize {
		q.free = append(q.free, b)
	}
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

// Flush seals the open segment with everything enqueued before the call and
// waits until it is published or ctx is done.
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
		return b.err
	case <-ctx.Done():
		return fmt.Errorf("dlqdump: flush: %w", ctx.Err())
	}
}

// Close flushes everything, publishes the last segment and stops the Queue,
// waiting as long as that takes (see Shutdown to bound it). A second call
// returns ErrClosed.
func (q *Queue) Close() error {
	return q.Shutdown(context.Background())
}

// Shutdown is Close bounded by ctx. If ctx ends first, the Queue stops anyway
// and the error counts the records that were not written; with an fs.Writer
// the blocks already written stay in the open segment and are recovered on
// the next start.
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.closed = true
	b := q.cutLocked(FlushClose)
	if q.waiting > 0 {
		close(q.space)
		q.space = make(chan struct{})
	}
	q.mu.Unlock()
	var err error
	select {
	case <-b.done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	q.closeOnce.Do(func() { close(q.quit); q.cancel() })
	<-q.loopDone
	q.wg.Wait()
	if err == nil {
		return nil
	}
	// Abandoned: release the open segment as it is (a crash-recovering
	// sink finds it on the next start), count what was not written and
	// release durable waiters.
	if q.seg != nil {
		if c, ok := q.seg.sw.(io.Closer); ok {
			_ = c.Close()
		}
		q.seg = nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var lost int
	gone := fmt.Errorf("%w: the queue was shut down before the record was written", ErrClosed)
	for _, ib := range append(q.inflight, q.unsynced...) {
		if !ib.written {
			lost += ib.count
		}
		if ib.done != nil && ib.err == nil {
			ib.err = gone
			close(ib.done)
		}
	}
	q.inflight, q.unsynced = nil, nil
	q.mw.Fail("shutdown")
	serr := fmt.Errorf("dlqdump: shutdown: %d records not written: %w", lost, err)
	if last := q.lastErr.Load(); last != nil {
		serr = fmt.Errorf("%w; last sink error: %w", serr, *last)
	}
	q.log.Error("shutdown before the dump was written", slog.Int("records", lost), slog.Any("error", serr))
	return serr
}

// Size returns the bytes accepted but not yet written, plus the Writer's
// backlog (see Backlogger). It implements queue.Interface.
func (q *Queue) Size() int {
	n := q.pending.Load()
	if q.backlog != nil {
		n += q.backlog.Backlog()
	}
	return int(n)
}

// Capacity returns Config.MaxPending. It implements queue.Interface.
func (q *Queue) Capacity() int { return int(q.c.MaxPending) }

// Rate returns Size over Capacity: how close Enqueue is to backpressure. It
// implements queue.Interface.
func (q *Queue) Rate() float32 { return float32(q.Size()) / float32(q.c.MaxPending) }

// QueueStats are a Queue's counters.
type QueueStats struct {
	// Records is the number of records accepted by Enqueue.
	Records uint64
	// Segments is the number of segments published.
	Segments uint64
	// Pending is the bytes accepted but not yet written.
	Pending int64
	// LastError is the last sink error, nil after a successful write.
	LastError error
}

// Stats returns the Queue's counters.
func (q *Queue) Stats() QueueStats {
	s := QueueStats{Records: q.records.Load(), Segments: q.segments.Load(), Pending: q.pending.Load()}
	if e := q.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// unwrap returns the item to encode and its headers.
func unwrap(x any) (any, Headers) {
	var h Headers
	for {
		switch v := x.(type) {
		case queue.Job:
			x = v.Payload
		case *queue.Job:
			if v == nil {
				return x, h
			}
			x = v.Payload
		case Envelope:
			x, h = v.Item, merge(h, v.Headers)
		case *Envelope:
			if v == nil {
				return x, h
			}
			x, h = v.Item, merge(h, v.Headers)
		case HeaderCarrier:
			return x, merge(h, v.DLQHeaders())
		default:
			return x, h
		}
	}
}

// merge returns outer with inner's keys added where outer lacks them.
func merge(outer, inner Headers) Headers {
	if len(outer) == 0 {
		return inner
	}
	if len(inner) == 0 {
		return outer
	}
	m := make(Headers, len(outer)+len(inner))
	for k, v := range inner {
		m[k] = v
	}
	for k, v := range outer {
		m[k] = v
	}
	return m
}

func withHeader(h Headers, k, v string) Headers {
	m := make(Headers, len(h)+1)
	for hk, hv := range h {
		m[hk] = hv
	}
	m[k] = v
	return m
}

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func putScratch(b *[]byte) {
	if cap(*b) <= 1<<20 {
		scratchPool.Put(b)
	}
}
