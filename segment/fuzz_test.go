package segment

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// fuzzMaxBlock caps the blocks FuzzReader's readers accept, so that the
// fuzzer cannot make them allocate much.
const fuzzMaxBlock = 1 << 16

// fuzzOptions returns the reader options fuzzRead reads data with. Both
// bound what a block may expand to, and so the work of an execution, by a
// multiple of the input's size, so that the fuzzer runs thousands of
// executions a second: a cap on the expansion, or (for one input in two) on
// the block size only, which bounds the expansion too since a block takes
// at least 61 bytes. Encrypted segments are read with fuzzKey.
func fuzzOptions(name string, data []byte) *ReaderOptions {
	if len(data)%2 == 1 {
		return &ReaderOptions{Name: name, MaxBlockSize: 4 << 10, Keys: testKeys{fuzzKey}}
	}
	return &ReaderOptions{Name: name, MaxBlockSize: fuzzMaxBlock, MaxExpansion: 64, Keys: testKeys{fuzzKey}}
}

// FuzzReader feeds arbitrary bytes to NewReader, reads all it can with Next,
// NextBlock, Seek and Pos, ReadBlock and a Stream, and scans them: nothing
// may panic, loop or allocate past the cap, every error must be typed, every
// record consistent with its block, and the Stream must deliver what
// ReadBlock reads.
func FuzzReader(f *testing.F) {
	for _, seed := range readerSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, data)
	})
}

func fuzzRead(t *testing.T, data []byte) {
	const name = "fuzz.dlq"
	size := int64(len(data))
	opts := fuzzOptions(name, data)
	r, err := NewReader(bytes.NewReader(data), size, opts)
	if err != nil {
		checkCorruptError(t, err, name)
		if _, err := Scan(bytes.NewReader(data), size, opts); err == nil {
			t.Fatal("Scan accepted what NewReader refused")
		}
		return
	}
	if r.Size() != size {
		t.Fatalf("Size() = %d, want %d", r.Size(), size)
	}
	if r.Sealed() != (r.FooterError() == nil) || r.Sealed() != (r.Footer() != nil) {
		t.Fatalf("Sealed() = %v, FooterError() = %v", r.Sealed(), r.FooterError())
	}
	if !r.Sealed() {
		checkCorruptError(t, r.FooterError(), name)
	}
	if s, err := r.Summary(); err != nil {
		if !errors.Is(err, ErrNoKey) {
			checkCorruptError(t, err, name)
		}
	} else if s != nil && s.Blocks() != len(r.Footer().Blocks) {
		t.Fatalf("summary of %d blocks, footer %d", s.Blocks(), len(r.Footer().Blocks))
	}
	// Every call of Next either returns a record or moves past at least
	// one byte of damage, so a segment of n bytes takes fewer than n calls
	// besides those returning records.
	var seqs []uint64
	var positions []Position
	var returned uint64
	next := uint64(0)
	for calls := int64(0); ; calls++ {
		if calls-int64(returned) > size+2 {
			t.Fatalf("Next does not end: %d calls for %d records on %d bytes", calls, returned, size)
		}
		positions = append(positions, r.Pos())
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			ce := checkCorruptError(t, err, name)
			if ce.Offset < HeaderSize || ce.Offset > size {
				t.Fatalf("error at offset %d: %v", ce.Offset, err)
			}
			continue
		}
		checkFuzzRecord(t, r, rec, next)
		next = rec.Seq + 1
		seqs = append(seqs, rec.Seq)
		returned++
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next after EOF: %v", err)
	}
	if ft := r.Footer(); ft != nil && returned > ft.Records {
		t.Fatalf("read %d records, the footer counts %d", returned, ft.Records)
	}
	// Resuming from a position gives the records after it. Two
	// positions, as each costs a read of the whole segment.
	for k := range min(len(positions), 2) {
		pos := positions[(k+1)*(len(positions)-1)/3]
		r2, err := NewReader(bytes.NewReader(data), size, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.Seek(pos); err != nil {
			t.Fatalf("Seek(%+v): %v", pos, err)
		}
		var rest []uint64
		for calls := int64(0); calls <= size+2+int64(len(seqs)); calls++ {
			rec, err := r2.Next()
			if err == io.EOF {
				break
			}
			if err == nil {
				rest = append(rest, rec.Seq)
			}
		}
		i := 0
		for i < len(seqs) && seqs[i] < pos.Seq {
			i++
		}
		if !slices.Equal(rest, seqs[i:]) {
			t.Fatalf("resumed at %+v: records %v, want %v", pos, rest, seqs[i:])
		}
	}
	// Block by block.
	if err := r.Seek(Position{}); err != nil {
		t.Fatal(err)
	}
	var blocks []BlockInfo
	for calls := int64(0); ; calls++ {
		if calls > size+2 {
			t.Fatal("NextBlock does not end")
		}
		b, err := r.NextBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			checkCorruptError(t, err, name)
			continue
		}
		if b.Count == 0 || int(b.RawLen) > opts.MaxBlockSize || b.End() > size || b.Offset < HeaderSize ||
			opts.MaxExpansion > 0 && int64(b.RawLen) > int64(opts.MaxExpansion)*(b.End()-b.Offset) {
			t.Fatalf("block %+v", b)
		}
		blocks = append(blocks, b)
	}
	var inBlocks uint64
	for _, b := range blocks {
		inBlocks += uint64(b.Count)
	}
	if inBlocks != returned {
		t.Fatalf("blocks hold %d records, Next returned %d", inBlocks, returned)
	}
	// Scan finds a prefix of those blocks.
	res, err := Scan(bytes.NewReader(data), size, opts)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if res.Sealed != r.Sealed() || len(res.Blocks) > len(blocks) || res.End > size || res.Size != size {
		t.Fatalf("Scan: %+v", res)
	}
	var records uint64
	for i, b := range res.Blocks {
		if b != blocks[i] {
			t.Fatalf("Scan block %d: %+v, NextBlock found %+v", i, b, blocks[i])
		}
		records += uint64(b.Count)
	}
	if records != res.Records {
		t.Fatalf("Scan: %d records in its blocks, says %d", records, res.Records)
	}
	if res.Damage != nil {
		checkCorruptError(t, res.Damage, name)
	}
	// A Stream delivers what ReadBlock reads, with one of the option sets
	// (each starts goroutines).
	want := blockEvents(t, open(t, data, opts))
	so := streamOptionSets[len(data)%len(streamOptionSets)]
	if got := streamEvents(t, open(t, data, opts), so); !slices.Equal(got, want) {
		t.Fatalf("stream with %+v:\n%s\nReadBlock:\n%s", so, lines(got), lines(want))
	}
}

// open returns a Reader of data, which must open.
func open(t testing.TB, data []byte, opts *ReaderOptions) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkFuzzRecord checks what can be checked of a record read from an
// arbitrary segment.
func checkFuzzRecord(t *testing.T, r *Reader, rec Record, next uint64) {
	b := r.Block()
	if rec.Seq < next || rec.Seq < b.FirstSeq || rec.Seq >= b.FirstSeq+uint64(b.Count) {
		t.Fatalf("record seq %d, block %+v, expected at least %d", rec.Seq, b, next)
	}
	if rec.Time < b.MinTime || rec.Time > b.MaxTime {
		t.Fatalf("record time %d outside its block's [%d, %d]", rec.Time, b.MinTime, b.MaxTime)
	}
	if len(rec.Payload) > int(b.RawLen) {
		t.Fatalf("payload of %d bytes in a block of %d", len(rec.Payload), b.RawLen)
	}
	n := 0
	for k, v := range rec.Headers.All() {
		if got, ok := rec.Headers.Get(k); !ok || (got != v && n == 0) {
			t.Fatalf("Headers.Get(%q) = %q, %v; All gives %q", k, got, ok, v)
		}
		n++
	}
	if n != rec.Headers.Len() {
		t.Fatalf("Headers.All yields %d headers, Len() = %d", n, rec.Headers.Len())
	}
	if m := rec.Headers.Map(); len(m) > n {
		t.Fatalf("Headers.Map() has %d headers, Len() = %d", len(m), n)
	}
}

// readerSeeds returns the seeds of FuzzReader: valid segments of each codec,
// unsealed, truncated, flipped and empty ones. They are small, a few hundred
// bytes: when the fuzzer finds an input that reaches new code, it minimizes
// it, trying to remove every range of its bytes, which takes time quadratic
// in its size and stops fuzzing meanwhile.
func readerSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	recs := testRecords(4)
	for i := range recs {
		// Compressible, so the blocks are stored compressed.
		recs[i].payload = append(appendJSONRecord(nil, uint64(i), 8+i*3), strings.Repeat("ab", 12)...)
		recs[i].headers = nil
	}
	recs[1].payload = nil
	recs[2].headers = map[string]string{"": ""}
	recs[3].headers = map[string]string{"k": "v"}
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, &WriterOptions{BlockSize: 60}, recs)
		summarized := writeRecords(t, codec, &WriterOptions{BlockSize: 60, Summarize: true}, recs)
		seeds = append(seeds, summarized)
		unsealed, _ := unsealedSegment(t, codec, 60, recs[:3])
		flipped := bytes.Clone(data)
		flipped[HeaderSize+BlockHeaderSize+4] ^= 0x08
		seeds = append(seeds, data, unsealed, data[:len(data)*2/3], data[:len(data)-5], flipped)
	}
	empty := writeRecords(t, CodecNone, nil, nil)
	seeds = append(seeds, empty, empty[:HeaderSize], nil)
	// Encrypted, under the key the fuzz targets read with.
	for _, codec := range []Codec{CodecNone, CodecZstd} {
		data := encryptedSegment(t, codec, 60, fuzzKey, recs)
		start := open(t, data, nil).Start()
		flipped := bytes.Clone(data)
		flipped[start+BlockHeaderSize+4] ^= 0x08
		seeds = append(seeds, data, data[:len(data)*2/3], flipped)
	}
	return seeds
}

// fuzzZstd compresses for FuzzBlock; fuzz functions run one at a time in a
// process.
var fuzzZstd *zstd.Encoder

// FuzzBlock fuzzes what lies behind a block's checksum, which FuzzReader
// can hardly reach: a block with arbitrary header fields and stored bytes
// (or arbitrary raw bytes compressed with its codec), given a valid
// checksum, read as FuzzReader reads.
func FuzzBlock(f *testing.F) {
	for _, codec := range allCodecs {
		var bb BlockBuilder
		for i, r := range testRecords(5) {
			bb.Add(r.t, append(AppendHeaders(nil, r.headers), r.payload[:i*7]...))
		}
		c, err := NewCompressor(codec, 0)
		if err != nil {
			f.Fatal(err)
		}
		var eb EncodedBlock
		c.Encode(&eb, &bb)
		info := eb.info
		f.Add(byte(info.Codec), info.Count, info.RawLen, bb.base, info.MinTime, info.MaxTime, eb.buf[BlockHeaderSize:], false)
		f.Add(byte(codec), info.Count, info.RawLen, bb.base, info.MinTime, info.MaxTime, bb.Raw(), true)
	}
	f.Add(byte(1), uint32(1), uint32(100), int64(0), int64(0), int64(0), []byte("\x28\xb5\x2f\xfd\x00\x58garbage"), false)
	f.Fuzz(func(t *testing.T, codecByte byte, count, rawLen uint32, base, minT, maxT int64, stored []byte, compressRaw bool) {
		codec := Codec(codecByte)
		if compressRaw {
			rawLen = uint32(len(stored))
			switch codec {
			case CodecZstd:
				if fuzzZstd == nil {
					var err error
					if fuzzZstd, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)); err != nil {
						t.Fatal(err)
					}
				}
				stored = fuzzZstd.EncodeAll(stored, nil)
			case CodecS2:
				stored = s2.Encode(nil, stored)
			}
		}
		blk := &craftedBlock{codec: codec, count: count, rawLen: rawLen, storedLen: -1, base: base, min: minT, max_: maxT, stored: stored}
		data := craftSegment(CodecNone, blk)
		fuzzRead(t, data)
		// Sealed in an encrypted segment, which the reader opens: what
		// lies behind the tag is read as what lies behind a checksum.
		fuzzRead(t, craftEncryptedSegment(t, fuzzKey, blk))
		// The same block twice, the second with the next sequence
		// numbers.
		blk2 := *blk
		blk2.firstSeq = uint64(count)
		fuzzRead(t, blk2.appendTo(data))
	})
}
