package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// craftedBlock is a block with any header fields: crafted blocks carry a
// valid checksum whatever they say, as a hostile or buggy writer makes them.
type craftedBlock struct {
	typ             byte // blockTypeData when 0
	codec           Codec
	count, rawLen   uint32
	storedLen       int64 // len(stored) when < 0
	firstSeq        uint64
	base, min, max_ int64
	stored          []byte

	seal    *sealer // seals the block, for an encrypted segment, when set
	counter uint32  // its nonce counter
}

func (c *craftedBlock) appendTo(dst []byte) []byte {
	h := make([]byte, BlockHeaderSize)
	le := binary.LittleEndian
	le.PutUint32(h[0:], blockMagic)
	h[4] = c.typ
	if h[4] == 0 {
		h[4] = blockTypeData
	}
	h[5] = byte(c.codec)
	le.PutUint32(h[8:], c.count)
	le.PutUint32(h[12:], c.rawLen)
	sl := uint32(len(c.stored))
	if c.storedLen >= 0 {
		sl = uint32(c.storedLen)
	}
	le.PutUint32(h[16:], sl)
	le.PutUint64(h[20:], c.firstSeq)
	le.PutUint64(h[28:], uint64(c.base))
	le.PutUint64(h[36:], uint64(c.min))
	le.PutUint64(h[44:], uint64(c.max_))
	stored := c.stored
	if c.seal != nil {
		le.PutUint16(h[6:], blockSealed)
		le.PutUint32(h[16:], sl+TagSize)
		le.PutUint32(h[52:], c.counter)
		stored = c.seal.seal(nil, h[:56], c.stored, c.counter)
	}
	crc := crc32.Update(crc32.Checksum(stored, castag), castag, h[:56])
	le.PutUint32(h[56:], crc)
	dst = append(dst, h...)
	return append(dst, stored...)
}

// craftSegment returns a segment header followed by blocks, unsealed.
func craftSegment(codec Codec, blocks ...*craftedBlock) []byte {
	h := testHeader(codec)
	h.FormatVersion = FormatVersion
	b := make([]byte, HeaderSize)
	h.marshal(b, HeaderSize)
	for _, c := range blocks {
		b = c.appendTo(b)
	}
	return b
}

// compress returns raw as stored by codec.
func compress(t testing.TB, codec Codec, raw []byte) []byte {
	t.Helper()
	switch codec {
	case CodecZstd:
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		return enc.EncodeAll(raw, nil)
	case CodecS2:
		return s2.Encode(nil, raw)
	}
	return raw
}

// allocated returns how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// readCrafted reads data to the end and returns its records and errors.
func readCrafted(t testing.TB, data []byte, opts *ReaderOptions) (recs []Record, errs []error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 1 << 22 {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, rec)
	}
	t.Fatal("Next does not end")
	return nil, nil
}

// TestCraftedRawLength reads blocks with a valid checksum whose header
// claims a raw length its stored bytes do not decode to: the reader must
// find out before it allocates that much.
func TestCraftedRawLength(t *testing.T) {
	// One record: no headers, a compressible payload.
	var bb BlockBuilder
	bb.Add(7, append([]byte{0}, bytes.Repeat([]byte("abc"), 100)...))
	raw := bb.Raw()
	for _, codec := range allCodecs {
		stored := compress(t, codec, raw)
		for _, rawLen := range []uint32{60 << 20, MaxBlockSize, uint32(len(raw)) + 1, uint32(len(raw)) - 1, uint32(len(stored))} {
			if rawLen == uint32(len(raw)) || rawLen < uint32(len(stored)) {
				continue
			}
			data := craftSegment(codec, &craftedBlock{codec: codec, count: 1, rawLen: rawLen, stored: stored, storedLen: -1, base: 7, min: 7, max_: 7})
			var errs []error
			var recs []Record
			n := allocated(func() { recs, errs = readCrafted(t, data, &ReaderOptions{Name: "crafted"}) })
			if len(recs) != 0 || len(errs) != 1 || !errors.Is(errs[0], ErrCorrupt) {
				t.Fatalf("%s, raw length %d: records %v, errors %v", codec, rawLen, recs, errs)
			}
			checkCorruptError(t, errs[0], "crafted")
			if n > 2<<20 {
				t.Errorf("%s: a %d-byte segment whose block claims %d raw bytes made the reader allocate %d bytes",
					codec, len(data), rawLen, n)
			}
		}
		// The same block with its true raw length reads.
		data := craftSegment(codec, &craftedBlock{codec: codec, count: 1, rawLen: uint32(len(raw)), stored: stored, storedLen: -1, base: 7, min: 7, max_: 7})
		recs, errs := readCrafted(t, data, nil)
		if len(errs) != 0 || len(recs) != 1 || string(recs[0].Payload) != string(raw[4:]) || recs[0].Time != 7 {
			t.Fatalf("%s: %v, %v", codec, recs, errs)
		}
	}
}

// TestCraftedManyRecords reads a small block that decompresses to a block
// of the smallest possible records, a million of them: the reader's memory
// must stay within the raw block and 4 bytes a record (where a 64-byte
// entry per record would be 21 times the raw block).
func TestCraftedManyRecords(t *testing.T) {
	const rawLen = 3 << 20
	raw := bytes.Repeat([]byte{2, 0, 0}, rawLen/3) // empty records
	for _, codec := range []Codec{CodecZstd, CodecS2} {
		stored := compress(t, codec, raw)
		data := craftSegment(codec, &craftedBlock{codec: codec, count: rawLen / 3, rawLen: rawLen, stored: stored, storedLen: -1})
		var count int
		n := allocated(func() {
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err != nil {
				t.Fatal(err)
			}
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if rec.Seq != uint64(count) || len(rec.Payload) != 0 || rec.Headers.Len() != 0 || rec.Time != 0 {
					t.Fatalf("record %d: %+v", count, rec)
				}
				if count == 1000 {
					// Resume in the middle of the block.
					r2, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := r2.Seek(r.Pos()); err != nil {
						t.Fatal(err)
					}
					if rec2, err := r2.Next(); err != nil || rec2.Seq != 1001 {
						t.Fatalf("resumed at %+v: %+v, %v", r.Pos(), rec2, err)
					}
				}
				count++
			}
		})
		if count != rawLen/3 {
			t.Fatalf("%s: %d records, want %d", codec, count, rawLen/3)
		}
		t.Logf("%s: %d-byte segment, %d records in a %d-byte block: %d bytes allocated", codec, len(data), count, rawLen, n)
		if perReader := uint64(rawLen + 4*rawLen/3 + 1<<20); n > 2*perReader { // two readers
			t.Errorf("%s: a %d-byte segment holding %d records in a %d-byte block made the reader allocate %d bytes",
				codec, len(data), count, rawLen, n)
		}
		// A block that says it holds one more record than it does is
		// damaged, and so is one that says it holds one less.
		for _, c := range []uint32{rawLen/3 + 1, rawLen/3 - 1} {
			data := craftSegment(codec, &craftedBlock{codec: codec, count: c, rawLen: rawLen, stored: stored, storedLen: -1})
			recs, errs := readCrafted(t, data, &ReaderOptions{Name: "count"})
			if len(recs) != 0 || len(errs) != 1 {
				t.Fatalf("%s: block claiming %d records: %d records, errors %v", codec, c, len(recs), errs)
			}
			checkCorruptError(t, errs[0], "count")
		}
	}
}

// TestReadBlockManyRecords reads the block of a million tiny records with
// ReadBlock: a Block indexes its records with 8 bytes each.
func TestReadBlockManyRecords(t *testing.T) {
	const rawLen = 3 << 20
	raw := bytes.Repeat([]byte{2, 0, 0}, rawLen/3)
	stored := compress(t, CodecZstd, raw)
	data := craftSegment(CodecZstd, &craftedBlock{codec: CodecZstd, count: rawLen / 3, rawLen: rawLen, stored: stored, storedLen: -1})
	var b Block
	n := allocated(func() {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ReadBlock(&b); err != nil {
			t.Fatal(err)
		}
		if err := r.ReadBlock(&b); err != io.EOF {
			t.Fatalf("second ReadBlock: %v", err)
		}
	})
	if n > rawLen+8*rawLen/3+1<<20 {
		t.Errorf("ReadBlock of a block of %d records in %d bytes allocated %d bytes", rawLen/3, rawLen, n)
	}
}

// TestCraftedUnsizedZstd reads blocks whose zstd frame does not say how
// long it decodes to (this package's writer always says it; a streaming
// encoder does not): they read when the block header's raw length is true,
// and when it is not, what is allocated follows what the frame decodes to,
// never the length the header claims.
func TestCraftedUnsizedZstd(t *testing.T) {
	var bb BlockBuilder
	for i := range 200 {
		bb.Add(7, append([]byte{0}, bytes.Repeat([]byte{byte('a' + i%26)}, 50)...))
	}
	raw := bb.Raw()
	// A single-segment frame with its content size, made into one with a
	// window and no content size.
	sized := compress(t, CodecZstd, raw)
	var h zstd.Header
	if err := h.Decode(sized); err != nil || !h.SingleSegment || !h.HasFCS {
		t.Fatalf("frame header %+v, %v", h, err)
	}
	fhd := sized[4] &^ 0xe0                                                               // no content size, not single segment
	stored := append(append(slices.Clone(sized[:4]), fhd, 4<<3), sized[h.HeaderSize:]...) // window 16 KiB
	if len(raw) > 16<<10 {
		t.Fatalf("%d raw bytes", len(raw))
	}
	if err := h.Decode(stored); err != nil || h.HasFCS {
		t.Fatalf("frame header %+v, %v: want one without a content size", h, err)
	}
	blk := func(rawLen uint32) []byte {
		return craftSegment(CodecZstd, &craftedBlock{codec: CodecZstd, count: 200, rawLen: rawLen, stored: stored, storedLen: -1, base: 7, min: 7, max_: 7})
	}
	recs, errs := readCrafted(t, blk(uint32(len(raw))), nil)
	if len(errs) != 0 || len(recs) != 200 {
		t.Fatalf("true raw length: %d records, errors %v", len(recs), errs)
	}
	checkStream(t, blk(uint32(len(raw))), nil)
	for _, rawLen := range []uint32{MaxBlockSize, 1 << 20, uint32(len(raw)) + 1, uint32(len(raw)) - 1} {
		data := blk(rawLen)
		n := allocated(func() { recs, errs = readCrafted(t, data, &ReaderOptions{Name: "unsized"}) })
		if len(recs) != 0 || len(errs) != 1 || !errors.Is(errs[0], ErrCorrupt) {
			t.Fatalf("raw length %d: records %d, errors %v", rawLen, len(recs), errs)
		}
		checkCorruptError(t, errs[0], "unsized")
		if n > 1<<20 {
			t.Errorf("a block of %d stored bytes decoding to %d, claiming %d, made the reader allocate %d bytes", len(stored), len(raw), rawLen, n)
		}
		checkStream(t, data, &ReaderOptions{Name: "unsized"})
	}
}

// TestResyncBounded reads an unsealed segment whose every 64 bytes start a
// plausible block header that claims the rest of the file, with a wrong
// checksum: looking for an intact block after each would checksum the file
// quadratically often. The reader gives up once it has checksummed twice the
// file and two blocks, and says so.
func TestResyncBounded(t *testing.T) {
	const size = 1 << 20
	seg := craftSegment(CodecNone)
	le := binary.LittleEndian
	for len(seg) < size {
		h := make([]byte, 64)
		le.PutUint32(h, blockMagic)
		h[4] = blockTypeData
		rest := uint32(size - len(seg) - BlockHeaderSize)
		le.PutUint32(h[8:], 1)
		le.PutUint32(h[12:], rest)
		le.PutUint32(h[16:], rest)
		seg = append(seg, h...)
	}
	seg = seg[:size]
	for _, maxBlock := range []int{0, 64 << 10} {
		r, err := NewReader(bytes.NewReader(seg), size, &ReaderOptions{Name: "resync", MaxBlockSize: maxBlock})
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		for range size {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			checkCorruptError(t, err, "resync")
			errs = append(errs, err)
		}
		if limit := r.resyncBudget() + size; r.resyncs > limit || len(errs) < 2 || !strings.Contains(errs[len(errs)-1].Error(), "gave up") {
			t.Fatalf("max block %d: checksummed %d bytes (limit %d), errors %v", maxBlock, r.resyncs, limit, errs)
		}
		checkStream(t, seg, &ReaderOptions{Name: "resync", MaxBlockSize: maxBlock})
	}
}
