package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
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
		checkMem(t, &b)
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
		if opts == nil || !opts.Reuse {
			checkMem(t, b)
		}
		events = append(events, blockDigest(b))
		b.Release()
	}
	t.Fatal("Stream does not end")
	return nil
}

// checkMem fails unless the memory of b, which an item kept from it pins,
// is about its raw size.
func checkMem(t testing.TB, b *Block) {
	t.Helper()
	raw := int(b.Info().RawLen)
	if b.Mem() < raw || b.Mem() > raw+raw/4+8192+decodeSlack {
		t.Fatalf("block at %d of %d raw bytes holds %d bytes of memory", b.Info().Offset, raw, b.Mem())
	}
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
	// A Seek outside the blocks fails and changes nothing.
	if err := s.Seek(positions[30]); err != nil {
		t.Fatal(err)
	}
	b, err = s.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seek(Position{Offset: int64(len(data)) + 1}); err == nil {
		t.Fatal("Seek past the end accepted")
	}
	n := int(b.Next().Seq)
	b.Release()
	readFrom(s, n)
}
