package dlqdump

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/sink"
)

// stallWriter discards segments; its writes wait while it is stalled.
type stallWriter struct {
	mu   sync.Mutex
	gate chan struct{}
}

func newStallWriter() *stallWriter {
	g := make(chan struct{})
	close(g)
	return &stallWriter{gate: g}
}

func (w *stallWriter) stall()   { w.mu.Lock(); w.gate = make(chan struct{}); w.mu.Unlock() }
func (w *stallWriter) release() { w.mu.Lock(); close(w.gate); w.mu.Unlock() }

func (w *stallWriter) Create(context.Context, string) (sink.SegmentWriter, error) {
	return stallSegment{w}, nil
}

type stallSegment struct{ w *stallWriter }

func (s stallSegment) Write(p []byte) (int, error) {
	s.w.mu.Lock()
	g := s.w.gate
	s.w.mu.Unlock()
	<-g
	return len(p), nil
}
func (stallSegment) Sync() error                  { return nil }
func (stallSegment) Truncate(int64) error         { return nil }
func (stallSegment) Commit(context.Context) error { return nil }
func (stallSegment) Abort() error                 { return nil }

// newStallQueue returns a Queue writing to w: S2, one compressor, 8 MiB
// MaxPending, and ErrBackpressure at once when it is full. It is closed when
// the test ends (w must not be stalled then).
func newStallQueue(t *testing.T, w *stallWriter) *Queue {
	t.Helper()
	q, err := NewQueue(&Config{
		Writer:         w,
		Capacity:       64 * Megabyte,
		Codec:          S2,
		Compressors:    1,
		MaxPending:     8 * Megabyte,
		EnqueueTimeout: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// records returns 4,096 generated ~300 B dead letters, converted to any once
// (Enqueue itself then allocates nothing).
func records(seed uint64) []any {
	var rs []any
	for _, r := range gen.New(seed).Events(1<<12, 300) {
		rs = append(rs, r)
	}
	return rs
}

// waitDrained waits until every block cut is compressed, written and
// finished: its buffers back in the free lists. The writer loop takes a
// block off inflight before it finishes it (after the seal, when the block
// filled the segment), so inflight and work empty is not enough for the
// free lists' accounting to add up (issue 30: checkFreeLists failed with
// "bufBytes 17107040, the lists and the open block hold 16812061", one
// block's buffers, once in 30 runs at load 20); the loop finishes every
// block it took before it is back at its select, where it takes a kick:
// with one kick in the channel's buffer (its capacity), a second one goes in
// only once the loop took one, after the pass that wrote the last block.
func waitDrained(q *Queue) {
	for {
		q.mu.Lock()
		n := len(q.inflight) + len(q.work)
		q.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	q.kick <- struct{}{}
	q.kick <- struct{}{}
}

// fillPending enqueues recs, round robin, until MaxPending is full, calling
// each (if not nil) before every Enqueue.
func fillPending(t *testing.T, q *Queue, recs []any, each func(i int)) {
	t.Helper()
	for i := 0; ; i++ {
		if each != nil {
			each(i)
		}
		err := q.Enqueue(recs[i%len(recs)])
		if errors.Is(err, ErrBackpressure) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkFreeLists checks the free lists' accounting: freeBytes is what they
// hold, and beyond minFree buffers of a kind they stay within bufLimit. When
// the Queue is idle (nothing cut is left to compress or write), bufBytes is
// what the lists and the open block hold.
func checkFreeLists(t *testing.T, q *Queue) (free, raw int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	var sum int64
	for _, b := range q.free {
		sum += int64(b.eb.Cap())
	}
	for _, r := range q.rawFree {
		sum += int64(cap(r))
	}
	if sum != q.freeBytes {
		t.Fatalf("freeBytes %d, the lists hold %d", q.freeBytes, sum)
	}
	if (len(q.free) > q.minFree() || len(q.rawFree) > q.minFree()) && q.freeBytes > q.bufLimit() {
		t.Fatalf("%d and %d buffers (%d bytes) kept, beyond %d each and over bufLimit %d",
			len(q.free), len(q.rawFree), q.freeBytes, q.minFree(), q.bufLimit())
	}
	if len(q.inflight) == 0 && len(q.work) == 0 {
		if held := sum + int64(cap(q.cur.bb.Raw())+q.cur.eb.Cap()); held != q.bufBytes {
			t.Fatalf("bufBytes %d, the lists and the open block hold %d", q.bufBytes, held)
		}
	}
	return len(q.free), len(q.rawFree)
}

// After a writer stall the buffers of the blocks written are kept for reuse
// within bufLimit, and a Flush lets go of all but what cycles through the
// compressors: a Queue that went quiet does not keep a burst's memory.
func TestFreeListsBoundedAndTrimmed(t *testing.T) {
	w := newStallWriter()
	q := newStallQueue(t, w)
	w.stall()
	fillPending(t, q, records(3), func(i int) {
		if i%512 == 0 {
			checkFreeLists(t, q)
		}
	})
	w.release()
	waitDrained(q)
	if free, _ := checkFreeLists(t, q); free <= q.minFree() {
		t.Fatalf("%d encoded buffers kept after the stall drained; want more than %d (kept within bufLimit)", free, q.minFree())
	}
	if err := q.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if free, raw := checkFreeLists(t, q); free > q.minFree() || raw > q.minFree() {
		t.Fatalf("after Flush %d encoded and %d raw buffers kept; want at most %d each", free, raw, q.minFree())
	}
}

// A Queue whose writer stalls again and again, each time until MaxPending
// is full, reuses the block buffers of the first stall: it does not let the
// raw buffers of the blocks compressed during a stall go (the pending bytes
// are at MaxPending then) only to allocate them again when the writer catches
// up. Measured by the bytes of block buffers the Queue allocates in later
// stalls, and by the bytes the process allocates (not under the race
// detector, whose sync.Pool lets go of the Encoder's scratch buffers).
func TestBuffersReusedAcrossStalls(t *testing.T) {
	w := newStallWriter()
	q := newStallQueue(t, w)
	recs := records(5)
	var ms runtime.MemStats
	var allocated, buffers []uint64
	queueAllocated := func() uint64 {
		q.mu.Lock()
		defer q.mu.Unlock()
		return uint64(q.allocated)
	}
	for cycle := range 10 {
		runtime.ReadMemStats(&ms)
		before, buffersBefore := ms.TotalAlloc, queueAllocated()
		w.stall()
		fillPending(t, q, recs, nil)
		// Let the compressor finish the stall's blocks before the writer
		// goes on: their raw buffers come back while MaxPending is full.
		for {
			q.mu.Lock()
			n := len(q.work)
			q.mu.Unlock()
			if n == 0 {
				break
			}
			time.Sleep(time.Millisecond) // not Gosched: a busy wait takes the compressor's CPU
		}
		w.release()
		waitDrained(q)
		runtime.ReadMemStats(&ms)
		allocated = append(allocated, ms.TotalAlloc-before)
		buffers = append(buffers, queueAllocated()-buffersBefore)
		if cycle > 1 {
			checkFreeLists(t, q)
		}
	}
	// After the first stalls, new buffers are allocated only when a stall
	// holds more blocks at once than any before (the compressor's timing
	// decides), which the buffers MaxPending needs bound: far less than
	// letting go of and allocating again a stall's worth each time.
	check := func(what string, per []uint64) {
		t.Helper()
		var later uint64
		for _, n := range per[2:] {
			later += n
		}
		if limit := uint64(q.c.MaxPending); later > limit {
			t.Fatalf("%s per stall %v: %d in the last %d stalls, want at most MaxPending (%d); the buffers of the first ones should be reused",
				what, per, later, len(per)-2, limit)
		}
	}
	check("block buffers allocated", buffers)
	if !raceEnabled {
		check("bytes allocated", allocated)
	}
}

// A record larger than the block grows the open block's buffer; bufBytes
// counts what it grew by, so that letting that buffer go later does not take
// off more than was counted (a drift down would lift bufLimit for good).
func TestBufBytesCountsGrownBuffers(t *testing.T) {
	q, err := NewQueue(&Config{Writer: newStallWriter(), Capacity: Megabyte, BlockSize: 4 * Kilobyte, Codec: S2})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	big := gen.New(9).Events(40, 64<<10)
	for i, r := range big {
		if err := q.Enqueue(r); err != nil {
			t.Fatal(err)
		}
		if i%8 == 7 {
			if err := q.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			checkFreeLists(t, q)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bufBytes < 0 {
		t.Fatalf("bufBytes %d", q.bufBytes)
	}
}
