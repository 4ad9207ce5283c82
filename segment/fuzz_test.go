package segment

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// fuzzMaxBlock caps the blocks FuzzReader's readers accept, so that the
// fuzzer cannot make them allocate much.
const fuzzMaxBlock = 1 << 16

// FuzzReader feeds arbitrary bytes to NewReader, reads all it can with Next,
// NextBlock, Seek and Pos, and scans them: nothing may panic, loop or
// allocate past the cap, every error must be typed and every record
// consistent with its block.
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
	opts := &ReaderOptions{Name: name, MaxBlockSize: fuzzMaxBlock}
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
	// Every call of Next either returns a record or moves past at least
	// one byte of damage, so a segment of n bytes takes fewer than n calls.
	var seqs []uint64
	var positions []Position
	var returned uint64
	next := uint64(0)
	for calls := int64(0); ; calls++ {
		if calls > size+2 {
			t.Fatalf("Next does not end: %d calls on %d bytes", calls, size)
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
	// Resuming from a position gives the records after it. A few
	// positions, as each costs a read of the whole segment.
	for k := range min(len(positions), 5) {
		pos := positions[k*(len(positions)-1)/4]
		r2, err := NewReader(bytes.NewReader(data), size, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := r2.Seek(pos); err != nil {
			t.Fatalf("Seek(%+v): %v", pos, err)
		}
		var rest []uint64
		for calls := int64(0); calls <= size+2; calls++ {
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
		if fmt.Sprint(rest) != fmt.Sprint(seqs[i:]) {
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
		if b.Count == 0 || b.RawLen > fuzzMaxBlock || b.End() > size || b.Offset < HeaderSize {
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

// FuzzRoundTrip writes records made from arbitrary bytes, with any codec
// and block size, and reads them back: they must come back identical.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range roundTripSeeds() {
		f.Add(s.data, s.codec, s.blockSize)
	}
	f.Fuzz(func(t *testing.T, data []byte, codecByte byte, blockSize uint16) {
		recs := decodeFuzzRecords(data)
		codec := Codec(codecByte % 3)
		opts := &WriterOptions{BlockSize: 1 + int(blockSize), Level: int(codecByte/3) % 5}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(codec), opts)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if i%2 == 0 {
				err = w.Add(time.Unix(0, r.t), r.headers, r.payload)
			} else {
				err = w.AddRecord(r.t, append(AppendHeaders(nil, r.headers), r.payload...))
			}
			if err != nil {
				t.Fatal(err)
			}
			if codecByte&0x80 != 0 && i%5 == 4 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data = buf.Bytes()
		r := readAllRecords(t, data, recs)
		for i, b := range r.Footer().Blocks {
			if b.Count > 1 && int(b.RawLen) > opts.BlockSize {
				t.Fatalf("block %d: %d records in %d raw bytes, block size %d", i, b.Count, b.RawLen, opts.BlockSize)
			}
		}
		res, err := Scan(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil || !res.Sealed || res.Damage != nil || res.Records != uint64(len(recs)) {
			t.Fatalf("Scan: %+v, %v", res, err)
		}
		// The same records copied into another segment.
		r = readAllRecords(t, data, recs)
		if err := r.Seek(Position{}); err != nil {
			t.Fatal(err)
		}
		readAllRecords(t, copyRecords(t, r, nil), recs)
	})
}

// decodeFuzzRecords makes records out of arbitrary bytes. Each record takes
// a control byte: bits 0-1 the number of headers, bit 2 a two-byte payload
// length, bit 3 an 8-byte time (else the time goes up by the byte's value),
// bit 4 a payload repeating its bytes to 64 times its length (up to 1 KiB);
// then the headers (a length byte and bytes for each key and value) and the
// payload. Records stop at 2000 or 1 MiB of payloads.
func decodeFuzzRecords(data []byte) []rec {
	take := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n]
		data = data[n:]
		return b
	}
	takeByte := func() int {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return int(b)
	}
	var recs []rec
	total := 0 // payload bytes, at most 1 MiB
	t := genBaseTime.UnixNano()
	for len(data) > 0 && len(recs) < 2000 {
		ctl := takeByte()
		var headers map[string]string
		if nh := ctl & 3; nh > 0 {
			headers = map[string]string{}
			for range nh {
				k := string(take(takeByte() % 16))
				headers[k] = string(take(takeByte()))
			}
		}
		n := takeByte()
		if ctl&4 != 0 {
			n = n<<8 | takeByte()
		}
		payload := bytes.Clone(take(n))
		if ctl&16 != 0 && len(payload) > 0 && len(payload) <= 1024 {
			payload = bytes.Repeat(payload, 64)
		}
		if total += len(payload); total > 1<<20 {
			break
		}
		if ctl&8 != 0 {
			var b [8]byte
			copy(b[:], take(8))
			t = int64(binary.LittleEndian.Uint64(b[:]))
		} else {
			t += int64(ctl) * 1000
		}
		recs = append(recs, rec{t: t, headers: headers, payload: payload})
	}
	return recs
}

type roundTripSeed struct {
	data      []byte
	codec     byte
	blockSize uint16
}

func roundTripSeeds() []roundTripSeed {
	var seeds []roundTripSeed
	// Records with headers and JSON payloads, as the encoding above reads
	// them.
	var data []byte
	for i := range 16 {
		ctl := byte(i%4) | 4
		if i%5 == 0 {
			ctl |= 8
		}
		if i%7 == 0 {
			ctl |= 16
		}
		data = append(data, ctl)
		for j := range i % 4 {
			k := genReasons[(i+j)%len(genReasons)]
			data = append(data, byte(len(k)))
			data = append(data, k...)
			v := genSources[(i*j)%len(genSources)]
			data = append(data, byte(len(v)))
			data = append(data, v...)
		}
		p := appendJSONRecord(nil, uint64(i), 20+i*7)
		data = append(data, byte(len(p)>>8), byte(len(p)))
		data = append(data, p...)
		if ctl&8 != 0 {
			data = binary.LittleEndian.AppendUint64(data, uint64(genBaseTime.UnixNano()-int64(i)*1e9))
		}
	}
	for c := range byte(3) {
		seeds = append(seeds,
			roundTripSeed{data, c, 4095},
			roundTripSeed{data, c | 0x80, 300},
			roundTripSeed{data[:len(data)/3], c + 3, 0},
		)
	}
	seeds = append(seeds,
		roundTripSeed{nil, 1, 100},
		roundTripSeed{[]byte{0, 0}, 2, 1},
		roundTripSeed{[]byte{0x1f, 3, 'a', 'b', 'c', 1, 'x', 0, 0, 1, 'y', 0, 200}, 0, 65535},
		roundTripSeed{[]byte{0x0c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x80}, 1, 7},
	)
	return seeds
}

// readerSeeds returns the seeds of FuzzReader: valid segments of each codec,
// unsealed, truncated, flipped and empty ones.
func readerSeeds(t testing.TB) [][]byte {
	// Small, so that the fuzzer's minimization of interesting inputs is
	// quick.
	var seeds [][]byte
	recs := testRecords(12)
	for i := range recs {
		// Compressible, so the blocks are stored compressed.
		recs[i].payload = append(appendJSONRecord(nil, uint64(i), 10+i*3), strings.Repeat("ab", 40)...)
	}
	recs[5].payload = nil
	recs[9].headers = map[string]string{"": ""}
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, &WriterOptions{BlockSize: 300}, recs)
		unsealed, _ := unsealedSegment(t, codec, 300, recs[:6])
		flipped := bytes.Clone(data)
		flipped[HeaderSize+BlockHeaderSize+20] ^= 0x08
		seeds = append(seeds, data, unsealed, data[:len(data)*2/3], data[:len(data)-5], flipped)
	}
	empty := writeRecords(t, CodecNone, nil, nil)
	seeds = append(seeds, empty, empty[:HeaderSize], nil)
	return seeds
}

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite the checked-in seed corpus of the fuzz targets")

// TestFuzzCorpus checks the seed corpus checked in under testdata/fuzz:
// well-formed files for each fuzz target, covering valid segments of every
// codec. With -update-fuzz-corpus it writes the corpus first.
func TestFuzzCorpus(t *testing.T) {
	if *updateFuzzCorpus {
		writeFuzzCorpus(t)
	}
	// FuzzReader: among the seeds, a valid sealed segment of each codec.
	codecs := map[Codec]bool{}
	files := corpusFiles(t, "FuzzReader")
	for _, path := range files {
		vals := readCorpusFile(t, path, "[]byte")
		data := vals[0].([]byte)
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil || !r.Sealed() {
			continue
		}
		// A sealed segment without damage whose blocks are all stored
		// with its codec.
		n := 0
		for {
			b, err := r.NextBlock()
			if err == io.EOF {
				break
			}
			if err != nil || b.Codec != r.Header().Codec {
				n = -1
				break
			}
			n++
		}
		if n > 1 {
			codecs[r.Header().Codec] = true
		}
	}
	for _, c := range allCodecs {
		if !codecs[c] {
			t.Errorf("no valid %s segment among the %d FuzzReader seeds", c, len(files))
		}
	}
	for _, path := range corpusFiles(t, "FuzzRoundTrip") {
		readCorpusFile(t, path, "[]byte", "byte", "uint16")
	}
}

func corpusFiles(t *testing.T, target string) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("%d seed files for %s, want at least 10", len(files), target)
	}
	return files
}

// readCorpusFile parses a "go test fuzz v1" file with values of the given
// types ([]byte, byte or uint16).
func readCorpusFile(t *testing.T, path string, types ...string) []any {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != "go test fuzz v1" || len(lines) != len(types)+1 {
		t.Fatalf("%s: not a go test fuzz v1 file of %v", path, types)
	}
	var vals []any
	for i, typ := range types {
		line := lines[i+1]
		var v any
		var n int
		var err error
		switch typ {
		case "[]byte":
			var s string
			n, err = fmt.Sscanf(line, "[]byte(%q)", &s)
			v = []byte(s)
		case "byte":
			var c string
			if lit, ok := strings.CutPrefix(line, "byte("); ok && strings.HasSuffix(lit, ")") {
				c, err = strconv.Unquote(strings.TrimSuffix(lit, ")"))
			}
			if r, size := utf8.DecodeRuneInString(c); size == len(c) && size > 0 && r < 256 {
				n, v = 1, byte(r)
			}
		case "uint16":
			var u uint16
			n, err = fmt.Sscanf(line, "uint16(%d)", &u)
			v = u
		}
		if n != 1 || err != nil {
			t.Fatalf("%s line %d: %q is not a %s: %v", path, i+2, line, typ, err)
		}
		vals = append(vals, v)
	}
	return vals
}

func writeFuzzCorpus(t *testing.T) {
	write := func(target, name string, vals ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range vals {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case byte:
				fmt.Fprintf(&b, "byte(%q)\n", v)
			default:
				fmt.Fprintf(&b, "%T(%v)\n", v, v)
			}
		}
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"sealed", "unsealed", "truncated-two-thirds", "truncated-trailer", "flipped"}
	seeds := readerSeeds(t)
	for i, s := range seeds[:len(allCodecs)*len(kinds)] {
		write("FuzzReader", fmt.Sprintf("%s-%s", allCodecs[i/len(kinds)], kinds[i%len(kinds)]), s)
	}
	for i, name := range []string{"empty-sealed", "header-only", "empty"} {
		write("FuzzReader", name, seeds[len(allCodecs)*len(kinds)+i])
	}
	for i, s := range roundTripSeeds() {
		write("FuzzRoundTrip", fmt.Sprintf("seed-%02d", i), s.data, s.codec, s.blockSize)
	}
}

// TestFuzzRecordsEncoding checks that decodeFuzzRecords decodes the
// encoding it documents.
func TestFuzzRecordsEncoding(t *testing.T) {
	t.Parallel()
	recs := decodeFuzzRecords([]byte{
		0x01, 1, 'k', 2, 'v', 'w', 3, 'a', 'b', 'c',
		0x10, 1, 'z',
		0x0c, 0, 2, 'x', 'y', 1, 2, 3, 4, 5, 6, 7, 0x80,
		0x00, 0,
	})
	if len(recs) != 4 || !maps.Equal(recs[0].headers, map[string]string{"k": "vw"}) || string(recs[0].payload) != "abc" ||
		string(recs[1].payload) != strings.Repeat("z", 64) || recs[1].headers != nil || recs[1].t != recs[0].t+16000 ||
		string(recs[2].payload) != "xy" || uint64(recs[2].t) != 0x8007060504030201 ||
		len(recs[3].payload) != 0 || recs[3].t != recs[2].t {
		t.Fatalf("decodeFuzzRecords: %+v", recs)
	}
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
		// The same block twice, the second with the next sequence
		// numbers.
		blk2 := *blk
		blk2.firstSeq = uint64(count)
		fuzzRead(t, blk2.appendTo(data))
	})
}
