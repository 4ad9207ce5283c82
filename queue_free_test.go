package dlqdump

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/gen"
	"github.com/dlqdump/dlqdump/sink"
)

// gatedWriter discards segments; its writes wait while the gate is closed.
type gatedWriter struct{ gate chan struct{} }

func (w gatedWriter) Create(context.Context, string) (sink.SegmentWriter, error) {
	return gatedSegment(w), nil
}

type gatedSegment struct{ gate chan struct{} }

func (s gatedSegment) Write(p []byte) (int, error) { <-s.gate; return len(p), nil }
func (gatedSegment) Sync() error                   { return nil }
func (gatedSegment) Truncate(int64) error          { return nil }
func (gatedSegment) Commit(context.Context) error  { return nil }
func (gatedSegment) Abort() error                  { return nil }

// checkFreeLists checks the free lists' accounting: freeBytes is what they
// hold, and beyond minFree buffers of a kind they stay within MaxPending.
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
	if (len(q.free) > q.minFree() || len(q.rawFree) > q.minFree()) && q.freeBytes > int64(q.c.MaxPending) {
		t.Fatalf("%d and %d buffers (%d bytes) kept, beyond %d each and over MaxPending %d",
			len(q.free), len(q.rawFree), q.freeBytes, q.minFree(), q.c.MaxPending)
	}
	return len(q.free), len(q.rawFree)
}

// After a writer stall the buffers of the blocks written are kept for reuse
// within MaxPending, and a Flush lets go of all but what cycles through the
// compressors: a Queue that went quiet does not keep a burst's memory.
func TestFreeListsBoundedAndTrimmed(t *testing.T) {
	gate := make(chan struct{})
	q, err := NewQueue(&Config{
		Writer:         gatedWriter{gate},
		Capacity:       16 * Megabyte,
		Codec:          S2,
		Compressors:    1,
		MaxPending:     8 * Megabyte,
		EnqueueTimeout: -1, // ErrBackpressure at once: the stall is full
	})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	records := gen.New(3).Events(1<<12, 300)
	for i := 0; ; i++ {
		err := q.Enqueue(records[i%len(records)])
		if errors.Is(err, ErrBackpressure) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i%512 == 0 {
			checkFreeLists(t, q)
		}
	}
	close(gate)
	// Wait for the writer to write every block the stall held.
	inflight := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.inflight)
	}
	for deadline := time.Now().Add(time.Minute); inflight() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d blocks still to write a minute after the writer was let go", inflight())
		}
		time.Sleep(time.Millisecond)
	}
	if free, _ := checkFreeLists(t, q); free <= q.minFree() {
		t.Fatalf("%d encoded buffers kept after the stall drained; want more than %d (kept within MaxPending)", free, q.minFree())
	}
	if err := q.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if free, raw := checkFreeLists(t, q); free > q.minFree() || raw > q.minFree() {
		t.Fatalf("after Flush %d encoded and %d raw buffers kept; want at most %d each", free, raw, q.minFree())
	}
}
