package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// blockDigest describes a block and its records in one line, so that two
// ways of reading a segment can be compared.
func blockDigest(b *Block) string {
	h := crc32.NewIEEE()
	var buf []byte
	n := 0
	for rec := range b.Records() {
		buf = binary.AppendUvarint(buf[:0], rec.Seq)
		buf = binary.AppendVarint(buf, rec.Time)
		buf = AppendRecordHeaders(buf, rec.Headers)
		buf = binary.AppendUvarint(buf, uint64(len(rec.Payload)))
		buf = append(buf, rec.Payload...)
		h.Write(buf)
		n++
	}
	info := b.Info()
	return fmt.Sprintf("block at %d: seq %d+%d, %d records from %d, digest %08x", info.Offset, info.FirstSeq, info.Count, n, b.start, h.Sum32())
}

// eventOf describes an error the way blockEvents and streamEvents list it.
func eventOf(err error) string {
	var ce *CorruptError
	switch {
	case err == io.EOF:
		return "EOF"
	case errors.As(err, &ce):
		return "corrupt: " + err.Error()
	}
	return "I/O: " + err.Error()
}

// blockEvents reads r with ReadBlock to the end or an I/O error, checking
// that Record and Records agree, and lists what it found.
func blockEvents(t testing.TB, r *Reader) []string {
	t.Helper()
	var events []string
	var b Block
	for range 1 << 20 {
		err := r.ReadBlock(&b)
		if err != nil {
			events = append(events, eventOf(err))
			var ce *CorruptError
			if errors.As(err, &ce) {
				continue
			}
			return events
		}
		i := 0
		for rec := range b.Records() {
			if got := b.Record(i); got.Seq != rec.Seq || got.Time != rec.Time || !bytes.Equal(got.Payload, rec.Payload) ||
				!bytes.Equal(got.Headers.b, rec.Headers.b) {
				t.Fatalf("block at %d: Record(%d) = %+v, Records gives %+v", b.Info().Offset, i, got, rec)
			}
			i++
		}
		if i != b.Len() {
			t.Fatalf("block at %d: Records gave %d records, Len() = %d", b.Info().Offset, i, b.Len())
		}
		events = append(events, blockDigest(&b))
	}
	t.Fatal("ReadBlock does not end")
	return nil
}

// streamEvents reads r with a Stream to the end or an I/O error and lists
// what it found, like blockEvents.
func streamEvents(t testing.TB, r *Reader, opts *StreamOptions) []string {
	t.Helper()
	s := NewStream(r, opts)
	defer s.Close()
	var events []string
	for range 1 << 20 {
		b, err := s.Next(context.Background())
		if err != nil {
			events = append(events, eventOf(err))
			var ce *CorruptError
			if errors.As(err, &ce) {
				continue
			}
			if again, err2 := s.Next(context.Background()); again != nil || err2 != err && err2.Error() != err.Error() {
				t.Fatalf("Next after %v: %v, %v", err, again, err2)
			}
			if (err == io.EOF) != s.AtEnd() || (err == io.EOF) != r.AtEnd() {
				t.Fatalf("after %v: AtEnd %v, Reader.AtEnd %v", err, s.AtEnd(), r.AtEnd())
			}
			return events
		}
		events = append(events, blockDigest(b))
		b.Release()
	}
	t.Fatal("Stream does not end")
	return nil
}

// streamOptionSets are the options checkStream tries.
var streamOptionSets = []*StreamOptions{
	nil,
	{Workers: 1, ReadAhead: 1},
	{Workers: 3, ReadAhead: 2000, Reuse: true},
}

// checkStream checks that a Stream, with each of a few options, delivers
// what ReadBlock reads from data.
func checkStream(t testing.TB, data []byte, ropts *ReaderOptions) {
	t.Helper()
	open := func() *Reader {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), ropts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := blockEvents(t, open())
	for _, so := range streamOptionSets {
		if got := streamEvents(t, open(), so); !slices.Equal(got, want) {
			t.Fatalf("stream with %+v:\n%s\nReadBlock:\n%s", so, lines(got), lines(want))
		}
	}
}

func lines(s []string) string {
	var b bytes.Buffer
	for _, l := range s {
		fmt.Fprintf(&b, "\t%s\n", l)
	}
	return b.String()
}

// TestStream reads segments of every codec, sealed and unsealed, intact and
// damaged, with Streams of several options, and checks they deliver what
// ReadBlock reads.
func TestStream(t *testing.T) {
	t.Parallel()
	recs := testRecords(300)
	for _, codec := range allCodecs {
		sealed := writeRecords(t, codec, &WriterOptions{BlockSize: 1500}, recs)
		unsealed, _ := unsealedSegment(t, codec, 1500, recs)
		r, err := NewReader(bytes.NewReader(sealed), int64(len(sealed)), nil)
		if err != nil {
			t.Fatal(err)
		}
		index := r.Footer().Blocks
		if len(index) < 10 {
			t.Fatalf("%s: %d blocks", codec, len(index))
		}
		for name, data := range map[string][]byte{
			"sealed":          sealed,
			"unsealed":        unsealed,
			"damaged block 3": flipByte(sealed, int(index[3].Offset)+BlockHeaderSize+2),
			"damaged footer":  flipByte(sealed, len(sealed)-20),
			"damaged unsealed": flipByte(flipByte(unsealed, int(index[1].Offset)+5),
				int(index[7].Offset)+BlockHeaderSize+1),
			"truncated": unsealed[:index[5].Offset+BlockHeaderSize+10],
		} {
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				checkStream(t, data, &ReaderOptions{Name: name})
			})
		}
		// All records come back, in order.
		r, err = NewReader(bytes.NewReader(sealed), int64(len(sealed)), nil)
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream(r, &StreamOptions{Workers: 2})
		n := 0
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
		if n != len(recs) || !s.AtEnd() {
			t.Fatalf("%s: %d records, AtEnd %v", codec, n, s.AtEnd())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != ErrStreamClosed {
			t.Fatalf("second Close: %v", err)
		}
		if b, err := s.Next(context.Background()); b != nil || err != ErrStreamClosed {
			t.Fatalf("Next after Close: %v, %v", b, err)
		}
	}
}

// TestStreamSeek resumes Streams at positions inside and between blocks,
// and seeks a running Stream.
func TestStreamSeek(t *testing.T) {
	t.Parallel()
	recs := testRecords(200)
	data := writeRecords(t, CodecZstd, &WriterOptions{BlockSize: 1000}, recs)
	open := func() *Reader {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Positions before every record, as Reader.Pos gives them.
	var positions []Position
	r := open()
	for {
		positions = append(positions, r.Pos())
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	readFrom := func(s *Stream, from int) {
		t.Helper()
		n := from
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != int(b.Info().Count)-b.start {
				t.Fatalf("Len %d", b.Len())
			}
			for rec := range b.Records() {
				checkRecord(t, rec, uint64(n), &recs[n])
				n++
			}
			b.Release()
		}
		if n != len(recs) {
			t.Fatalf("from record %d: read up to %d", from, n)
		}
	}
	for k := 0; k < len(positions); k += 7 {
		r := open()
		if err := r.Seek(positions[k]); err != nil {
			t.Fatal(err)
		}
		s := NewStream(r, &StreamOptions{Workers: 2, ReadAhead: 3000})
		readFrom(s, k)
		// Seek the same stream back, after the end.
		if err := s.Seek(positions[len(positions)-1-k]); err != nil {
			t.Fatal(err)
		}
		readFrom(s, len(positions)-1-k)
		s.Close()
	}
	// Seek in the middle of reading, holding a block across the Seek.
	s := NewStream(open(), &StreamOptions{Workers: 3})
	defer s.Close()
	b, err := s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seek(positions[100]); err != nil {
		t.Fatal(err)
	}
	readFrom(s, 100)
	checkRecord(t, b.Record(0), 0, &recs[0]) // still valid
	b.Release()
	if err := s.Seek(Position{Offset: int64(len(data)) + 1}); err == nil {
		t.Fatal("Seek past the end accepted")
	}
}

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

// TestStreamAbandoned checks that a Stream dropped without Close stops its
// goroutines once collected.
func TestStreamAbandoned(t *testing.T) {
	data := writeRecords(t, CodecZstd, &WriterOptions{BlockSize: 1000}, testRecords(200))
	before := runtime.NumGoroutine()
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
	for i := 0; runtime.NumGoroutine() > before; i++ {
		if i > 10000 {
			t.Fatalf("%d goroutines, %d before the abandoned stream", runtime.NumGoroutine(), before)
		}
		runtime.GC()
		runtime.Gosched()
	}
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
