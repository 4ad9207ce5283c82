package dlqdump

import (
	"github.com/dlqdump/dlqdump/internal/errs"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
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
//
// The Queue owns its Writer: it recovers what a crash left (sink.Recoverer),
// and Flush, Close and Shutdown return only once what they published is
// stored where readers find it, also with a Writer that uploads in the
// background (sink.Flusher, sink.Closer), or say what is not.
type Queue struct {
	c       *queueConfig
	mw      MetricsWriter
	log     *slog.Logger
	backlog sink.Backlogger     // nil unless the Writer is one
	watcher sink.BacklogWatcher // nil unless the Writer is one
	flusher sink.Flusher        // nil unless the Writer is one
	closer  sink.Closer         // nil unless the Writer is one

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
	// freeBytes is the capacity held in free and rawFree, bufBytes that of
	// every block buffer the Queue holds, raw and encoded, in blocks and in
	// the lists. A buffer let go of is kept while bufBytes fits what
	// MaxPending pending bytes take (bufLimit), so that a Queue whose writer
	// or compressors fall behind for a while reuses its buffers instead of
	// letting them go and allocating (and zeroing) new ones as soon as it
	// catches up, and never holds more than a burst took anyway.
	freeBytes int64
	bufBytes  int64
	allocated int64 // bytes of block buffers allocated so far

	// The sink-call protocol (see call), under mu.
	calling   string   // the writer loop's sink call in progress, "" if none
	doubt     []*block // blocks whose fate that call decides
	doubtRecs int      // more records whose fate it decides (a Commit's)
	abandoned bool     // Shutdown gave up: the loop starts no sink call
	reported  bool     // Shutdown counted the loop's state: the loop changes none of it

	commitInDoubt bool // set by Shutdown's count: the open segment's Commit may have taken effect

	pending  atomic.Int64 // bytes accepted, not yet written
	records  atomic.Uint64
	refused  refusals // Enqueue calls that stored nothing
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

	// Owned by the writer loop. Shutdown reads them only when the loop has
	// ended or is parked in a sink call (see call).
	seg        *openSegment
	sinceSync  []*block // Durable: blocks written into seg since its last good sync, in order
	sealing    *block   // written (or empty) and out of inflight; seal the segment, then finish it
	sealReason string
	held       []int // records of the last committed segments the Writer may hold (watcher only)
	failures   int
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
	written    bool          // in the open segment
	waiters    int           // Durable callers waiting for it
	done       chan struct{} // closed when handled, if anyone waits
	err        error         // set before done is closed when abandoned
}

// openSegment is the segment the writer loop is appending to.
type openSegment struct {
	name      string
	sw        sink.SegmentWriter
	w         *segment.Writer
	opened    time.Time
	footer    bool  // the footer is written, Commit pending
	committed bool  // Commit succeeded
	tried     bool  // Commit was called: a failed one may have taken effect
	synced    int64 // size at the last successful Sync
	records   int   // records in the blocks written, as w says between sink calls

	// cutTo >= 0: the sink may hold bytes after cutTo (a failed write, or
	// blocks written since a sync that failed), which must be truncated
	// before anything else is written or synced. cutBlocks are the blocks
	// those bytes may hold: in doubt until then. With requeue, they go
	// back to the head of the line to be written again.
	cutTo     int64
	cutBlocks []*block
	requeue   bool
}

// newBlockLocked returns an empty block, reusing finished ones' buffers.
func (q *Queue) newBlockLocked() *block {
	var b *block
	if n := len(q.free); n > 0 {
		b = q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		q.freeBytes -= int64(b.eb.Cap())
		*b = block{eb: b.eb}
	} else {
		b = &block{}
	}
	var raw []byte
	if n := len(q.rawFree); n > 0 {
		raw = q.rawFree[n-1]
		q.rawFree[n-1] = nil
		q.rawFree = q.rawFree[:n-1]
		q.freeBytes -= int64(cap(raw))
	} else {
		raw = make([]byte, 0, q.c.blockSize+q.c.blockSize/8)
		q.bufBytes += int64(cap(raw))
		q.allocated += int64(cap(raw))
	}
	b.bb.Reset(raw)
	return b
}

// Enqueue dumps x. x may be any item the Encoder takes, a queue.Job or
// *queue.Job (its Payload is dumped), an Envelope or *Envelope (its Headers
// are stored beside its Item), or a HeaderCarrier. Enqueue does no I/O; it
// waits only when the bytes not yet written exceed Config.MaxPending (for at
// most Config.EnqueueTimeout, then ErrBackpressure) and, in Durable mode, for
// the sync. An error means the item was not dumped, except ErrNotDurable;
// such a refusal is counted in Stats().Refused and the MetricsWriter (Fail),
// since a caller such as a koykov queue drops the error.
func (q *Queue) Enqueue(x any) error {
	item, headers := unwrap(x)
	if q.c.Source != "" {
		if _, ok := headers[HeaderSource]; !ok {
			headers = withHeader(headers, HeaderSource, q.c.Source)
		}
	}
	if _, ok := headers[HeaderRecordID]; ok {
		headers = withoutHeader(headers, HeaderRecordID) // a new record: a new ID
	}
	sp := scratchPool.Get().(*[]byte)
	defer putScratch(sp)
	body := segment.AppendHeaders((*sp)[:0], headers)
	body, err := q.c.Encoder.Encode(body, item)
	*sp = body
	if err != nil {
		return q.refuse(refusedEncode, item, errs.Chain(ErrEncode, err))
	}
	if len(body) > q.c.maxRecord {
		return q.refuse(refusedTooLarge, item, fmt.Errorf("%w: %T encodes to %d bytes, the cap is %d (Config.MaxRecordSize)", ErrTooLarge, item, len(body), q.c.maxRecord))
	}
	size := int64(segment.RecordSize(len(body)))
	now := time.Now().UnixNano()

	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return q.refuse(refusedClosed, item, ErrClosed)
	}
	if err := q.waitRoomLocked(size); err != nil {
		q.mu.Unlock()
		if errors.Is(err, ErrClosed) {
			return q.refuse(refusedClosed, item, err)
		}
		return q.refuse(refusedBackpressure, item, err)
	}
	b := q.cur
	if b.bb.Count() > 0 && b.bb.Len()+int(size) > q.c.blockSize {
		q.cutLocked("")
		b = q.cur
	}
	had := cap(b.bb.Raw())
	b.bb.Add(now, body)
	if c := cap(b.bb.Raw()); c != had {
		// A first record larger than the block grew its buffer.
		q.bufBytes += int64(c - had)
		q.allocated += int64(c)
	}
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

// backlogPoll bounds how long an Enqueue waiting for room goes without asking
// a Writer that is only a sink.Backlogger for its backlog: it asks after 1ms,
// then twice as long each time, up to this.
const backlogPoll = 50 * time.Millisecond

// waitRoomLocked waits until size more bytes fit under MaxPending. A record is
// always accepted when nothing is pending, however large. It wakes when the
// writer loop writes a block and when the Writer's backlog shrinks: at once
// with a sink.BacklogWatcher, by asking again with a Backlogger (every
// backlogPoll at most, on a timer of this call's own).
func (q *Queue) waitRoomLocked(size int64) error {
	limit := int64(q.c.MaxPending)
	if n, _ := q.used(); n == 0 || n+size <= limit {
		return nil
	}
	if q.c.EnqueueTimeout < 0 {
		n, _ := q.used()
		return q.backpressureErr(n, 0)
	}
	t := time.NewTimer(q.c.EnqueueTimeout)
	defer t.Stop()
	var poll *time.Timer // asks a Backlogger again
	var polled <-chan time.Time
	if q.watcher == nil && q.backlog != nil {
		poll = time.NewTimer(time.Hour)
		defer poll.Stop()
		polled = poll.C
	}
	for wait := time.Millisecond; ; wait = min(2*wait, backlogPoll) {
		n, changed := q.used()
		if n == 0 || n+size <= limit {
			return nil
		}
		if poll != nil {
			poll.Reset(wait)
		}
		ch := q.space
		q.waiting++
		q.mu.Unlock()
		var timedOut bool
		select {
		case <-ch:
		case <-changed:
		case <-polled:
		case <-t.C:
			timedOut = true
		}
		q.mu.Lock()
		q.waiting--
		if q.closed {
			return ErrClosed
		}
		if timedOut {
			if n, _ := q.used(); n == 0 || n+size <= limit {
				return nil
			}
			n, _ := q.used()
			return q.backpressureErr(n, q.c.EnqueueTimeout)
		}
	}
}

// used returns the bytes that count against MaxPending (pending plus the
// Writer's backlog) and a channel closed when the backlog changes (nil when
// the Writer does not say).
func (q *Queue) used() (int64, <-chan struct{}) {
	n := q.pending.Load()
	switch {
	case q.watcher != nil:
		bl := q.watcher.WatchBacklog()
		return n + bl.Bytes, bl.Changed
	case q.backlog != nil:
		return n + q.backlog.Backlog(), nil
	}
	return n, nil
}

// wakeLocked wakes the callers waiting for room.
func (q *Queue) wakeLocked() {
	if q.waiting > 0 {
		close(q.space)
		q.space = make(chan struct{})
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

// putRawLocked keeps the raw buffer of a compressed block for new blocks, or
// lets it go (keepLocked).
func (q *Queue) putRawLocked(raw []byte) {
	if q.keepLocked(len(q.rawFree), cap(raw), 2*q.c.blockSize) {
		q.rawFree = append(q.rawFree, raw)
		q.freeBytes += int64(cap(raw))
	}
}

// putBlockLocked keeps a finished block, with its encoded buffer, for reuse,
// or lets it go (keepLocked).
func (q *Queue) putBlockLocked(b *block) {
	if c := b.eb.Cap(); q.keepLocked(len(q.free), c, segment.EncodedCap(q.c.codec, 2*q.c.blockSize)) {
		q.free = append(q.free, b)
		q.freeBytes += int64(c)
	}
}

// keepLocked reports whether a buffer of capacity c let go of is kept in a
// list of n: one of at most largest bytes (what a block of twice the usual
// size needs: a buffer grown by a large record is not kept), when the list
// holds fewer than cycle through the compressors (minFree), or while the
// Queue's buffers fit bufLimit. Otherwise it no longer counts in bufBytes.
func (q *Queue) keepLocked(n, c, largest int) bool {
	if c <= largest && (n < q.minFree() || q.bufBytes <= q.bufLimit()) {
		return true
	}
	q.bufBytes -= int64(c)
	return false
}

// bufLimit is how many bytes of block buffers, in use and kept, the Queue
// keeps buffers within: what the blocks of MaxPending pending bytes hold at
// most, and those cycling through the compressors. A block holds a raw
// buffer until it is compressed and keeps its encoded one for the next use,
// so a Queue whose pending bytes swing between MaxPending and none, in
// either stage (writer or compressors behind), cycles its own buffers.
func (q *Queue) bufLimit() int64 {
	bs := int64(q.c.blockSize)
	blocks := int64(q.c.MaxPending)/bs + 2 + int64(q.minFree())
	return blocks * (bs + bs/8 + int64(segment.EncodedCap(q.c.codec, q.c.blockSize+q.c.blockSize/8)))
}

// minFree is how many buffers of each kind cycle blocks through the
// compressors without allocating.
func (q *Queue) minFree() int { return 2*q.c.Compressors + 4 }

// trimFreeLocked lets the collector have the buffers kept beyond minFree. It
// runs when a segment is sealed for any reason but its size (FlushInterval,
// Flush, Close): a Queue that went quiet does not hold a burst's buffers.
func (q *Queue) trimFreeLocked() {
	keep := q.minFree()
	for len(q.free) > keep {
		n := len(q.free) - 1
		q.freeBytes -= int64(q.free[n].eb.Cap())
		q.bufBytes -= int64(q.free[n].eb.Cap())
		q.free[n] = nil
		q.free = q.free[:n]
	}
	for len(q.rawFree) > keep {
		n := len(q.rawFree) - 1
		q.freeBytes -= int64(cap(q.rawFree[n]))
		q.bufBytes -= int64(cap(q.rawFree[n]))
		q.rawFree[n] = nil
		q.rawFree = q.rawFree[:n]
	}
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
			had := b.eb.Cap()
			if b.bb.Count() > 0 {
				comp.Encode(&b.eb, &b.bb)
				if !q.c.NoSummary {
					b.eb.Summarize(&b.bb) // here too, off the callers' goroutines
				}
				if ew, ok := q.mw.(ErrorMetricsWriter); ok {
					b.bb.HeaderValues(HeaderError, func(v []byte) { ew.DumpError(string(v)) })
				}
			}
			q.mu.Lock()
			b.compressed = true
			if c := b.eb.Cap(); c != had {
				q.bufBytes += int64(c - had)
				q.allocated += int64(c)
			}
			// The raw bytes are not needed any more: only the compressed
			// ones wait for the writer.
			q.putRawLocked(b.bb.Raw())
			b.bb.Reset(nil)
			q.mu.Unlock()
			select {
			case q.ready <- struct{}{}:
			default:
			}
		}
	}
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

func withoutHeader(h Headers, k string) Headers {
	m := make(Headers, len(h))
	for hk, hv := range h {
		if hk != k {
			m[hk] = hv
		}
	}
	return m
}

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func putScratch(b *[]byte) {
	if cap(*b) <= 1<<20 {
		scratchPool.Put(b)
	}
}
