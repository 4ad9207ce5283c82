package segment

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// gateReader is a ReaderAt that fails or blocks reads at or after an offset.
type gateReader struct {
	data  []byte
	at    int64
	fail  atomic.Bool   // reads at or after at fail
	gate  chan struct{} // reads at or after at wait for it to close, if set
	reads atomic.Int64
}

var errGate = errors.New("gate: read failed")

func (g *gateReader) ReadAt(p []byte, off int64) (int, error) {
	g.reads.Add(1)
	if off+int64(len(p)) > g.at {
		if g.gate != nil {
			<-g.gate
		}
		if g.fail.Load() {
			return 0, errGate
		}
	}
	return bytes.NewReader(g.data).ReadAt(p, off)
}

// TestStreamIOError checks that a failed read reaches the consumer after the
// blocks before it, as an error that is neither damage nor the end, that it
// sticks, and that a Seek retries.
func TestStreamIOError(t *testing.T) {
	t.Parallel()
	// A segment larger than the Reader's read-ahead window, so that reads
	// happen after the first blocks.
	recs := testRecords(6000)
	data, _ := unsealedSegment(t, CodecNone, 4000, recs)
	if len(data) < 2*readAhead {
		t.Fatalf("segment of %d bytes", len(data))
	}
	r0, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var infos []BlockInfo
	for {
		b, err := r0.NextBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, b)
	}
	// Fail from the block after the first read-ahead window.
	k := 0
	for infos[k].End() <= readAhead {
		k++
	}
	g := &gateReader{data: data, at: infos[k].End()}
	r, err := NewReader(g, int64(len(data)), &ReaderOptions{Name: "gate"})
	if err != nil {
		t.Fatal(err)
	}
	g.fail.Store(true)
	s := NewStream(r, &StreamOptions{Workers: 2})
	defer s.Close()
	var last *Block
	var got []uint64
	for {
		b, err := s.Next(context.Background())
		if err != nil {
			if err == io.EOF || errors.As(err, new(*CorruptError)) || !errors.Is(err, errGate) || errors.Is(err, io.EOF) {
				t.Fatalf("after %d blocks: %v, want the read error", len(got), err)
			}
			if b2, err2 := s.Next(context.Background()); b2 != nil || !errors.Is(err2, errGate) || s.AtEnd() {
				t.Fatalf("Next after the read error: %v, %v", b2, err2)
			}
			break
		}
		got = append(got, b.Info().FirstSeq)
		if last != nil {
			last.Release()
		}
		last = b
	}
	if li := last.Info(); len(got) == 0 || li.End() > g.at {
		t.Fatalf("read %d blocks before the error, the last ending at %d, the failure at %d", len(got), li.End(), g.at)
	}
	// The source recovers: Seek to after the last block delivered goes on.
	g.fail.Store(false)
	if err := s.Seek(last.Next()); err != nil {
		t.Fatal(err)
	}
	n := int(last.Next().Seq)
	last.Release()
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for rec := range b.Records() {
			checkRecord(t, rec, uint64(n), &recs[n])
			n++
		}
		b.Release()
	}
	if n != len(recs) || !r.AtEnd() {
		t.Fatalf("read up to record %d of %d after the retry", n, len(recs))
	}
}

// TestStreamCancel checks that Next returns when its context ends although
// the source does not answer, that Close from another goroutine wakes a
// waiting Next, and that Close then returns once the read ends.
func TestStreamCancel(t *testing.T) {
	t.Parallel()
	data := writeRecords(t, CodecNone, &WriterOptions{BlockSize: 4000}, testRecords(6000))
	g := &gateReader{data: data, at: int64(len(data)), gate: make(chan struct{})}
	r, err := NewReader(g, int64(len(data)), nil) // reads the header and footer
	if err != nil {
		t.Fatal(err)
	}
	// Every read now waits: from a block past the window NewReader read.
	g.at = 0
	bl := r.Footer().Blocks
	k := r.Footer().blockAfter(2 * readAhead)
	if k == len(bl) {
		t.Fatalf("segment of %d bytes", len(data))
	}
	if err := r.Seek(Position{Offset: bl[k].Offset, Seq: bl[k].FirstSeq}); err != nil {
		t.Fatal(err)
	}
	s := NewStream(r, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b, err := s.Next(ctx); b != nil || err != context.Canceled {
		t.Fatalf("Next with a cancelled context: %v, %v", b, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var nextErr error
	go func() {
		defer wg.Done()
		_, nextErr = s.Next(context.Background())
	}()
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	wg.Wait() // Close woke Next up while the read still waits
	if nextErr != ErrStreamClosed {
		t.Fatalf("Next during Close: %v", nextErr)
	}
	close(g.gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestStreamHeld checks that a consumer that holds blocks without releasing
// them still gets every block, one read ahead at most, and that the budget
// counts what is held.
func TestStreamHeld(t *testing.T) {
	t.Parallel()
	recs := testRecords(400)
	data := writeRecords(t, CodecZstd, &WriterOptions{BlockSize: 2000}, recs)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	const budget = 5000 // two blocks and a bit
	s := NewStream(r, &StreamOptions{Workers: 4, ReadAhead: budget})
	defer s.Close()
	var held []*Block
	var maxRaw int64
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		maxRaw = max(maxRaw, b.charge)
		held = append(held, b)
		s.s.mu.Lock()
		used, queued := s.s.used, len(s.s.queue)
		s.s.mu.Unlock()
		var heldBytes int64
		for _, h := range held {
			heldBytes += h.charge
		}
		// What is read ahead fits the budget, or is one block read for a
		// waiting consumer.
		if ahead := used - heldBytes; ahead > max(budget, maxRaw+int64(slotCost)) || queued > budget/slotCost {
			t.Fatalf("holding %d bytes in %d blocks, the stream holds %d more in %d slots", heldBytes, len(held), ahead, queued)
		}
	}
	n := 0
	for _, b := range held {
		for rec := range b.Records() {
			checkRecord(t, rec, uint64(n), &recs[n])
			n++
		}
		b.Release()
		b.Release() // twice: nothing more
	}
	if n != len(recs) {
		t.Fatalf("%d records", n)
	}
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	if s.s.used != 0 {
		t.Fatalf("every block released, %d bytes still counted", s.s.used)
	}
}

// TestStreamAbandoned checks that a consumer that stops early leaves no
// goroutine behind: after Close, and for a Stream dropped without Close,
// once it is collected.
func TestStreamAbandoned(t *testing.T) {
	data := writeRecords(t, CodecZstd, &WriterOptions{BlockSize: 1000}, testRecords(200))
	before := runtime.NumGoroutine()
	waitGoroutines := func(what string) {
		t.Helper()
		for i := 0; runtime.NumGoroutine() > before; i++ {
			if i > 10000 {
				t.Fatalf("%s: %d goroutines, %d before the stream", what, runtime.NumGoroutine(), before)
			}
			runtime.GC()
			runtime.Gosched()
		}
	}
	for _, workers := range []int{1, 8} {
		s := NewStream(open(t, data, nil), &StreamOptions{Workers: workers, ReadAhead: 1})
		if _, err := s.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		waitGoroutines("closed")
	}
	func() {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream(r, &StreamOptions{Workers: 8, ReadAhead: 1})
		if _, err := s.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}()
	waitGoroutines("abandoned")
}

// TestPayloadCapped checks that appending to a record's payload or a header
// value never writes over the record after it, however it was read.
func TestPayloadCapped(t *testing.T) {
	t.Parallel()
	recs := testRecords(100)
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, nil, recs)
		check := func(how string, all []Record) {
			t.Helper()
			for i := range all {
				rec := &all[i]
				if cap(rec.Payload) != len(rec.Payload) {
					t.Fatalf("%s, %s: record %d: payload of %d bytes has capacity %d", codec, how, i, len(rec.Payload), cap(rec.Payload))
				}
				_ = append(rec.Payload, "overwrite"...)
				for k := range rec.Headers.All() {
					v, _ := rec.Headers.Lookup(k)
					_ = append(v, "overwrite"...)
				}
			}
			for i := range all {
				checkRecord(t, all[i], uint64(i), &recs[i])
			}
		}
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		var all []Record
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, rec)
		}
		check("Next", all) // one block: Next's memory is not reused
		r.Seek(Position{})
		s := NewStream(r, nil)
		all = all[:0]
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			all = slices.AppendSeq(all, b.Records())
			b.Release()
		}
		s.Close()
		check("Stream", all)
	}
}
