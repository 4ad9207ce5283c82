package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// DefaultReadAhead is the default of StreamOptions.ReadAhead: 16 blocks of
// the default size.
const DefaultReadAhead = 4 << 20

// maxWorkers caps StreamOptions.Workers.
const maxWorkers = 256

// ErrStreamClosed is returned by the methods of a closed Stream.
var ErrStreamClosed = errors.New("dlqdump: segment stream closed")

// StreamOptions tune a Stream.
type StreamOptions struct {
	// Workers is the number of goroutines that decompress blocks and check
	// their records ahead of the consumer. Default runtime.GOMAXPROCS(0);
	// at most 256.
	Workers int
	// ReadAhead bounds the memory the stream holds, in bytes: the raw and
	// stored bytes of the blocks it has read and not yet delivered, and of
	// those delivered and not yet released. A block larger than ReadAhead is
	// read only when the consumer waits for it with no block ahead, so such
	// blocks are decoded one at a time. Besides, each worker keeps a decode
	// buffer of up to 1 MiB, and with Reuse up to ReadAhead bytes of
	// released blocks are kept for reuse. Default DefaultReadAhead.
	ReadAhead int
	// Reuse makes the stream decode later blocks into the memory of
	// released ones, saving an allocation of the block's size and the
	// garbage collection of it per block. Set it only if nothing refers to
	// a block's records after Release: no Payload or Headers slice, and no
	// item that shares their bytes (such as decoder.Fallthrough's items)
	// kept by a destination. Default false: every block gets new memory,
	// which records and items that outlive the block keep alive.
	Reuse bool
}

// Stream delivers a segment's blocks in order, decoded ahead on several
// goroutines: the reading goroutine reads and verifies blocks through the
// Reader (checksums, sequence numbers, the footer's index), Workers goroutines
// decompress them and check their records, and Next hands them to the
// consumer in segment order. Memory is bounded by StreamOptions.ReadAhead in
// bytes, whatever the number of blocks or records: the consumer calls
// Release on each block when done with it.
//
// Next, Seek and AtEnd are called by one goroutine at a time; Close may be
// called from any goroutine, also while Next waits; Block.Release from any.
// A Stream that is dropped without Close is stopped when the garbage
// collector finds it unreachable, but Close it: its goroutines hold the
// Reader and the source until then.
type Stream struct {
	s *stream
}

// stream is the state the goroutines share; they never refer to the Stream,
// so that an abandoned Stream can be collected and stopped.
type stream struct {
	r       *Reader
	name    string
	workers int
	budget  int64
	reuse   bool
	done    chan struct{} // closed by Close

	mu      sync.Mutex
	cond    sync.Cond // the reading goroutine waits on it for room
	run     *run
	used    int64   // bytes of the blocks queued, and delivered and not released
	queue   []*slot // read, not yet delivered, in segment order
	waiting bool    // the consumer waits for a block and none is queued
	stored  bufList // storage for stored bytes, for the workers
	raws    bufList // released blocks' memory, with reuse
	err     error   // a delivered I/O error: every later Next returns it
	eof     bool
	closed  bool
	ready   chan struct{} // a slot was queued
}

// run is one start of the stream's goroutines, ended by a Seek or Close.
type run struct {
	stop    chan struct{}
	stopped bool // under stream.mu
	work    chan *slot
	wg      sync.WaitGroup
}

// slot is one block on its way to the consumer, or an error in its place.
type slot struct {
	job    blockJob
	buf    []byte // the job's stored bytes, or raw bytes for CodecNone
	charge int64
	b      *Block
	err    error
	done   chan struct{} // closed when b or err is set
}

// slotCost is what a slot counts for besides its bytes.
const slotCost = 512

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewStream starts reading r from its current position (Seek it first to
// resume) on background goroutines. The Reader belongs to the Stream until
// Close returns: call none of its methods meanwhile except Header, Size,
// Name, Sealed, Footer and FooterError. After Close the Reader's position is
// wherever reading ahead stopped: Seek it before reading on.
func NewStream(r *Reader, opts *StreamOptions) *Stream {
	st := &stream{r: r, name: r.name, workers: runtime.GOMAXPROCS(0), budget: DefaultReadAhead,
		done: make(chan struct{}), ready: make(chan struct{}, 1)}
	if opts != nil {
		if opts.Workers > 0 {
			st.workers = opts.Workers
		}
		if opts.ReadAhead > 0 {
			st.budget = int64(opts.ReadAhead)
		}
		st.reuse = opts.Reuse
	}
	st.workers = min(st.workers, maxWorkers)
	st.cond.L = &st.mu
	st.start()
	s := &Stream{s: st}
	// Stopping waits for the goroutines: not on the cleanup goroutine.
	runtime.AddCleanup(s, func(st *stream) { go st.close() }, st)
	return s
}

// Next returns the next block in segment order; release it when done with
// its records. Next returns:
//   - a block and nil;
//   - nil and a *CorruptError: a damaged block, skipped; the next call goes
//     on with the next intact block;
//   - nil and io.EOF, the bare sentinel: the Reader reached the end of the
//     segment's blocks (AtEnd is true). Every later call returns io.EOF;
//   - nil and ctx's error: ctx ended while Next waited; the stream is intact
//     and Next may be called again;
//   - nil and ErrStreamClosed after Close;
//   - nil and any other error: reading the source failed. Reading stopped
//     there; every later call returns the same error until a Seek (to the
//     position after the last block delivered, Block.Next, to retry).
func (s *Stream) Next(ctx context.Context) (*Block, error) {
	st := s.s
	st.mu.Lock()
	for {
		switch {
		case st.closed:
			st.mu.Unlock()
			return nil, ErrStreamClosed
		case st.err != nil:
			err := st.err
			st.mu.Unlock()
			return nil, err
		case st.eof:
			st.mu.Unlock()
			return nil, io.EOF
		}
		if len(st.queue) > 0 {
			break
		}
		// Nothing read ahead: let a block over the budget be read.
		st.waiting = true
		st.cond.Broadcast()
		st.mu.Unlock()
		select {
		case <-st.ready:
		case <-st.done:
		case <-ctx.Done():
			st.mu.Lock()
			st.waiting = false
			st.mu.Unlock()
			return nil, ctx.Err()
		}
		st.mu.Lock()
	}
	st.waiting = false
	sl := st.queue[0]
	st.mu.Unlock()
	select {
	case <-sl.done:
	case <-st.done:
		return nil, ErrStreamClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, ErrStreamClosed
	}
	st.queue[0] = nil
	st.queue = st.queue[1:]
	if sl.b != nil {
		sl.b.st.Store(st) // its charge is returned by Release
		return sl.b, nil
	}
	st.used -= sl.charge
	st.cond.Broadcast()
	var ce *CorruptError
	switch {
	case sl.err == io.EOF:
		st.eof = true
	case !errors.As(sl.err, &ce):
		st.err = sl.err
	}
	return nil, sl.err
}

// AtEnd reports whether Next returned io.EOF: the Reader reached the end of
// the segment's blocks.
func (s *Stream) AtEnd() bool {
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	return s.s.eof
}

// Seek drops the blocks read ahead and goes on from pos, as returned by
// Block.Next or Reader.Pos. Blocks already delivered stay valid; release
// them as usual. Seek also clears an I/O error and the end.
func (s *Stream) Seek(pos Position) error {
	st := s.s
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return ErrStreamClosed
	}
	st.mu.Unlock()
	// Checked first: once halted, the Reader is past what was read ahead.
	if err := st.r.checkSeek(pos); err != nil {
		return err
	}
	st.halt()
	err := st.r.Seek(pos)
	st.mu.Lock()
	st.err, st.eof = err, false
	st.mu.Unlock()
	st.start()
	return err
}

// Close stops the stream and waits for its goroutines, which may take as
// long as a read of the source already under way. Blocks already delivered
// stay valid. A second call returns ErrStreamClosed.
func (s *Stream) Close() error {
	if !s.s.close() {
		return ErrStreamClosed
	}
	return nil
}

// close stops the stream; it reports false if it was already closed.
func (st *stream) close() bool {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return false
	}
	st.closed = true
	close(st.done)
	st.mu.Unlock()
	st.halt()
	st.mu.Lock()
	st.stored, st.raws = bufList{}, bufList{}
	st.mu.Unlock()
	return true
}

// start starts a run of the goroutines from the Reader's position.
func (st *stream) start() {
	ru := &run{stop: make(chan struct{}), work: make(chan *slot, 2*st.workers)}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	st.run = ru
	ru.wg.Add(1 + st.workers)
	go st.read(ru)
	for range st.workers {
		go st.decode(ru)
	}
}

// halt stops the current run, waits for its goroutines and drops what it
// read ahead.
func (st *stream) halt() {
	st.mu.Lock()
	ru := st.run
	if !ru.stopped {
		ru.stopped = true
		close(ru.stop)
		st.cond.Broadcast()
	}
	st.mu.Unlock()
	ru.wg.Wait()
	st.mu.Lock()
	for i, sl := range st.queue {
		st.used -= sl.charge
		st.queue[i] = nil
	}
	st.queue = st.queue[:0]
	st.waiting = false
	st.mu.Unlock()
	select {
	case <-st.ready:
	default:
	}
}

// read is the reading goroutine: it verifies blocks through the Reader, in
// order, and queues them for the workers and the consumer.
func (st *stream) read(ru *run) {
	defer ru.wg.Done()
	r := st.r
	for {
		j, err := r.nextJob()
		if err != nil {
			sl := &slot{err: err, done: closedChan, charge: slotCost}
			if !st.acquire(ru, sl.charge) || !st.enqueue(ru, sl) {
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) {
				return // the end, or an I/O error
			}
			continue
		}
		info := &j.info
		raw := int64(info.RawLen) + 4*int64((info.Count+indexStride-1)/indexStride) + slotCost
		stored := int64(0)
		if info.Codec != CodecNone {
			stored = int64(info.StoredLen)
		}
		sl := &slot{job: j, charge: raw + stored, done: make(chan struct{})}
		if !st.acquire(ru, sl.charge) {
			return
		}
		// The stored bytes are in the Reader's window, or in its buffer for
		// large ones, which the slot then takes: copy them out before the
		// next read.
		n := len(j.stored)
		switch {
		case n > readAhead && cap(r.big) <= n+n/4:
			// Not much larger: a block's raw bytes may take it whole.
			sl.buf, r.big = r.big, nil
			sl.job.stored = j.stored
		case info.Codec == CodecNone:
			// They are the raw bytes: their memory is the block's.
			sl.buf = st.rawBuf(n)
			sl.job.stored = append(sl.buf, j.stored...)
		default:
			sl.buf = st.get(&st.stored, n)
			sl.job.stored = append(sl.buf, j.stored...)
		}
		if !st.enqueue(ru, sl) {
			return
		}
		select {
		case ru.work <- sl:
		case <-ru.stop:
			return
		}
	}
}

// acquire waits until n more bytes fit the budget, or the consumer waits
// with nothing read ahead, and counts them. It reports false when the run is
// stopped.
func (st *stream) acquire(ru *run, n int64) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for !ru.stopped && st.used+n > st.budget && !(st.waiting && len(st.queue) == 0) {
		st.cond.Wait()
	}
	if ru.stopped {
		return false
	}
	st.used += n
	return true
}

// enqueue queues sl for the consumer; it reports false, returning sl's
// charge, when the run is stopped.
func (st *stream) enqueue(ru *run, sl *slot) bool {
	st.mu.Lock()
	if ru.stopped {
		st.used -= sl.charge
		st.mu.Unlock()
		return false
	}
	st.queue = append(st.queue, sl)
	st.mu.Unlock()
	select {
	case st.ready <- struct{}{}:
	default:
	}
	return true
}

// decode is a worker: it decodes the blocks the reading goroutine queues.
func (st *stream) decode(ru *run) {
	defer ru.wg.Done()
	var scratch []byte // this worker's decode buffer
	for {
		select {
		case sl := <-ru.work:
			scratch = st.decodeSlot(sl, scratch)
		case <-ru.stop:
			return
		}
	}
}

// decodeSlot decodes the block of sl, into scratch when it fits, and
// returns scratch.
func (st *stream) decodeSlot(sl *slot, scratch []byte) []byte {
	j := &sl.job
	var raw []byte
	var index []uint32
	var err error
	storedLen := int64(len(j.stored)) // what the slot was charged for
	if j.seal != nil {
		// In place: the slot owns its copy of the stored bytes.
		_, err = openJob(j.seal, j, j.stored[:0])
	}
	switch {
	case err != nil:
		if j.info.Codec != CodecNone {
			st.put(&st.stored, sl.buf, st.maxStored())
			st.mu.Lock()
			st.used -= storedLen
			sl.charge -= storedLen
			st.cond.Broadcast()
			st.mu.Unlock()
		}
	case j.info.Codec == CodecNone:
		raw = j.stored // its own memory already
		index, err = checkRecords(raw, &j.info, j.base, nil, true)
	default:
		if st.reuse {
			buf := st.get(&st.raws, int(j.info.RawLen)+decodeSlack)
			raw, index, err = decodeJob(j, buf, nil, true)
		} else {
			raw, index, scratch, err = decodeFresh(j, scratch, nil)
		}
		st.put(&st.stored, sl.buf, st.maxStored())
		st.mu.Lock()
		st.used -= storedLen // the stored bytes are no longer held
		sl.charge -= storedLen
		st.cond.Broadcast()
		st.mu.Unlock()
	}
	sl.buf, j.stored = nil, nil
	if err != nil {
		if st.reuse {
			st.put(&st.raws, raw, st.budget)
		}
		sl.err = &CorruptError{Segment: st.name, Offset: j.info.Offset, Block: j.idx, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}
	} else {
		sl.b = &Block{info: j.info, base: j.base, start: j.skip, raw: raw, index: index, charge: sl.charge}
	}
	close(sl.done)
	return scratch
}

// release returns a released block's charge, and its memory with Reuse.
func (st *stream) release(b *Block) {
	if st.reuse {
		// Before the charge is returned, so that the block decoded in its
		// place finds it.
		st.put(&st.raws, b.raw, st.budget)
	}
	st.mu.Lock()
	if !st.closed {
		st.used -= b.charge
		st.cond.Broadcast()
	}
	st.mu.Unlock()
	b.raw, b.index = nil, nil
}
