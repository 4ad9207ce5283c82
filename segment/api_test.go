package segment

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// testRecords returns n small records.
func testRecords(n int) []rec {
	recs := make([]rec, n)
	for i := range recs {
		h, _ := smallHeaders(uint64(i))
		recs[i] = rec{t: smallTime(uint64(i)).UnixNano(), headers: h, payload: smallPayload(nil, uint64(i))}
	}
	return recs
}

// unsealedSegment writes recs as blocks of about blockSize raw bytes
// without sealing the segment, as a writer that crashed leaves it.
func unsealedSegment(t testing.TB, codec Codec, blockSize int, recs []rec) ([]byte, *Writer) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(codec), &WriterOptions{BlockSize: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Add(time.Unix(0, r.t), r.headers, r.payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) || w.Records() != uint64(len(recs)) {
		t.Fatalf("writer: %d bytes and %d records, wrote %d and %d", w.Size(), w.Records(), buf.Len(), len(recs))
	}
	return buf.Bytes(), w
}

// TestScanSeal seals segments left unsealed, with and without a torn last
// block or footer, and checks they then read as sealed with every intact
// record.
func TestScanSeal(t *testing.T) {
	t.Parallel()
	recs := testRecords(300)
	for _, codec := range allCodecs {
		data, w := unsealedSegment(t, codec, 4096, recs)
		if w.Blocks() < 5 {
			t.Fatalf("%d blocks", w.Blocks())
		}
		var sealedBuf bytes.Buffer
		sealedBuf.Write(data)
		if _, err := sealedBuf.Write(appendFooter(nil, w.index, w.records, w.raw, w.stored, w.min, w.max, time.Now(), 0)); err != nil {
			t.Fatal(err)
		}
		// The last block, torn at several places, and a torn footer.
		last := w.index[len(w.index)-1]
		cases := []struct {
			name    string
			data    []byte
			records int
			damage  bool
		}{
			{"whole blocks", data, len(recs), false},
			{"torn block header", data[:last.Offset+BlockHeaderSize/2], len(recs) - int(last.Count), true},
			{"torn block", data[:last.Offset+BlockHeaderSize+int64(last.StoredLen)/2], len(recs) - int(last.Count), true},
			{"torn footer", sealedBuf.Bytes()[:len(data)+FooterFixedSize+7], len(recs), true},
			{"torn trailer", sealedBuf.Bytes()[:sealedBuf.Len()-1], len(recs), true},
			{"garbage after blocks", append(slices.Clip(data), bytes.Repeat([]byte{0x5a}, 100)...), len(recs), true},
			{"header only", data[:HeaderSize], 0, false},
		}
		for _, c := range cases {
			t.Run(codec.String()+"/"+c.name, func(t *testing.T) {
				res, err := Scan(bytes.NewReader(c.data), int64(len(c.data)), &ReaderOptions{Name: "scan"})
				if err != nil {
					t.Fatal(err)
				}
				if res.Sealed || res.Records != uint64(c.records) || res.Size != int64(len(c.data)) || (res.Damage != nil) != c.damage {
					t.Fatalf("Scan: sealed %v, %d records, size %d, damage %v; want unsealed, %d records, size %d, damage %v",
						res.Sealed, res.Records, res.Size, res.Damage, c.records, len(c.data), c.damage)
				}
				checkHeader(t, res.Header, testHeader(codec))
				if c.damage {
					checkCorruptError(t, res.Damage, "scan")
				}
				wantEnd := int64(HeaderSize)
				for i, b := range res.Blocks {
					if b != w.index[i] {
						t.Fatalf("block %d: %+v, written %+v", i, b, w.index[i])
					}
					wantEnd = b.End()
				}
				if res.End != wantEnd {
					t.Fatalf("Scan: End %d, want %d", res.End, wantEnd)
				}
				// Truncate at End, seal, and all the intact records are there.
				fixed := bytes.NewBuffer(slices.Clone(c.data[:res.End]))
				if err := Seal(fixed, res); err != nil {
					t.Fatal(err)
				}
				r := readAllRecords(t, fixed.Bytes(), recs[:c.records])
				ft := r.Footer()
				if len(ft.Blocks) != len(res.Blocks) || ft.RawBytes != sum(res.Blocks, func(b BlockInfo) uint64 { return uint64(b.RawLen) }) ||
					ft.StoredBytes != sum(res.Blocks, func(b BlockInfo) uint64 { return uint64(b.StoredLen) }) {
					t.Fatalf("sealed footer %+v for blocks %+v", ft, res.Blocks)
				}
				if c.records > 0 {
					minT, maxT := recs[0].t, recs[0].t
					for _, r := range recs[:c.records] {
						minT, maxT = min(minT, r.t), max(maxT, r.t)
					}
					if ft.MinTime.UnixNano() != minT || ft.MaxTime.UnixNano() != maxT {
						t.Fatalf("sealed footer times [%v, %v], want [%v, %v]", ft.MinTime, ft.MaxTime, time.Unix(0, minT), time.Unix(0, maxT))
					}
				} else if !ft.MinTime.IsZero() || !ft.MaxTime.IsZero() {
					t.Fatalf("empty segment footer times [%v, %v]", ft.MinTime, ft.MaxTime)
				}
				// Sealed, Scan finds it whole.
				res2, err := Scan(bytes.NewReader(fixed.Bytes()), int64(fixed.Len()), nil)
				if err != nil || !res2.Sealed || res2.Damage != nil || res2.Records != res.Records || res2.End != res.End {
					t.Fatalf("Scan of the sealed segment: %+v, %v", res2, err)
				}
			})
		}
	}
}

func sum[T any](s []T, f func(T) uint64) uint64 {
	var n uint64
	for _, v := range s {
		n += f(v)
	}
	return n
}

// TestScanDamagedHeader checks that Scan and NewReader reject segments
// whose header is not a segment header.
func TestScanDamagedHeader(t *testing.T) {
	t.Parallel()
	data := writeRecords(t, CodecZstd, nil, testRecords(10))
	cases := map[string]struct {
		data []byte
		want error
	}{
		"empty":         {nil, ErrCorrupt},
		"short":         {data[:HeaderSize-1], ErrCorrupt},
		"bad magic":     {append([]byte("PK\x03\x04"), data[4:]...), ErrFormat},
		"bad checksum":  {flipByte(data, 40), ErrCorrupt},
		"version 2":     {withHeader(data, func(b []byte) { b[8] = 2 }), ErrFormat},
		"header size 1": {withHeader(data, func(b []byte) { b[12] = 1 }), ErrFormat},
	}
	for name, c := range cases {
		_, err := NewReader(bytes.NewReader(c.data), int64(len(c.data)), &ReaderOptions{Name: name})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: NewReader: %v, want %v", name, err, c.want)
			continue
		}
		ce := checkCorruptError(t, err, name)
		if ce.Block != -1 || ce.Offset != 0 || !strings.Contains(err.Error(), "segment "+name+" offset 0:") {
			t.Errorf("%s: error %q at offset %d block %d", name, err, ce.Offset, ce.Block)
		}
		if _, err := Scan(bytes.NewReader(c.data), int64(len(c.data)), &ReaderOptions{Name: name}); !errors.Is(err, c.want) {
			t.Errorf("%s: Scan: %v, want %v", name, err, c.want)
		}
	}
	// An unnamed segment is called so in errors.
	_, err := NewReader(bytes.NewReader(nil), 0, nil)
	if err == nil || !strings.Contains(err.Error(), "<unnamed>") {
		t.Errorf("error for an unnamed segment: %v", err)
	}
}

func flipByte(data []byte, i int) []byte {
	d := slices.Clone(data)
	d[i] ^= 0x10
	return d
}

// withHeader changes a segment header and fixes its checksum.
func withHeader(data []byte, change func([]byte)) []byte {
	d := slices.Clone(data)
	change(d[:HeaderSize])
	crc := crc32.Checksum(d[:60], castag)
	d[60], d[61], d[62], d[63] = byte(crc), byte(crc>>8), byte(crc>>16), byte(crc>>24)
	return d
}

// TestWriterTruncate rolls a writer back to earlier block ends, writes other
// records, and checks the result is the segment those records make.
func TestWriterTruncate(t *testing.T) {
	t.Parallel()
	recs := testRecords(200)
	other := testRecords(400)[250:]
	for _, codec := range allCodecs {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(codec), &WriterOptions{BlockSize: 2048})
		if err != nil {
			t.Fatal(err)
		}
		var ends []int64 // Size() after each record's block was written
		var recsAt []int
		for i, r := range recs {
			if err := w.Add(time.Unix(0, r.t), r.headers, r.payload); err != nil {
				t.Fatal(err)
			}
			if i%30 == 29 {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				ends = append(ends, w.Size())
				recsAt = append(recsAt, i+1)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		// Not the end of a block.
		for _, bad := range []int64{HeaderSize - 1, HeaderSize + 1, ends[2] - 1, ends[2] + 1, w.Size() + 1} {
			if err := w.Truncate(bad); err == nil {
				t.Fatalf("Truncate(%d) accepted an offset that is not a block end", bad)
			}
		}
		size, blocks := w.Size(), w.Blocks()
		if err := w.Truncate(size); err != nil || w.Size() != size || w.Blocks() != blocks {
			t.Fatalf("Truncate to the current size: %v; size %d, blocks %d", err, w.Size(), w.Blocks())
		}
		for k := len(ends) - 1; k >= -1; k -= 3 {
			end, n := int64(HeaderSize), 0
			if k >= 0 {
				end, n = ends[k], recsAt[k]
			}
			if err := w.Truncate(end); err != nil {
				t.Fatalf("Truncate(%d): %v", end, err)
			}
			buf.Truncate(int(end))
			if w.Size() != end || w.Records() != uint64(n) {
				t.Fatalf("after Truncate(%d): size %d, %d records; want %d records", end, w.Size(), w.Records(), n)
			}
		}
		if w.Size() != HeaderSize || w.Blocks() != 0 || w.Records() != 0 {
			t.Fatalf("truncated to the header: size %d, %d blocks, %d records", w.Size(), w.Blocks(), w.Records())
		}
		// Rewrite: part of the first records, then others.
		want := slices.Clone(recs[:45])
		for _, r := range want {
			if err := w.Add(time.Unix(0, r.t), r.headers, r.payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		mid := w.Size()
		for _, r := range other[:50] {
			if err := w.Add(time.Unix(0, r.t), r.headers, r.payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := w.Truncate(mid); err != nil {
			t.Fatal(err)
		}
		buf.Truncate(int(mid))
		want = append(want, other...)
		for _, r := range other {
			if err := w.Add(time.Unix(0, r.t), r.headers, r.payload); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := w.Truncate(HeaderSize); err != ErrClosed {
			t.Fatalf("Truncate after Close: %v, want ErrClosed", err)
		}
		got := readAllRecords(t, buf.Bytes(), want).Footer()
		// The footer is the one of a segment written in one go.
		direct := writeRecordsBlocks(t, codec, want, []int{45})
		ref, err := NewReader(bytes.NewReader(direct), int64(len(direct)), nil)
		if err != nil {
			t.Fatal(err)
		}
		exp := ref.Footer()
		if got.Records != exp.Records || got.RawBytes != exp.RawBytes || got.StoredBytes != exp.StoredBytes ||
			!got.MinTime.Equal(exp.MinTime) || !got.MaxTime.Equal(exp.MaxTime) || !slices.Equal(got.Blocks, exp.Blocks) {
			t.Fatalf("%s: footer after truncations\n%+v\nwritten directly\n%+v", codec, got, exp)
		}
		if n := len(direct) - int(footerSize(len(exp.Blocks))); !bytes.Equal(buf.Bytes()[:n], direct[:n]) {
			t.Fatalf("%s: blocks after truncations differ from those written directly", codec)
		}
	}
}

// writeRecordsBlocks writes recs with block size 2048, flushing after the
// records numbered in flushAfter, and seals the segment.
func writeRecordsBlocks(t testing.TB, codec Codec, recs []rec, flushAfter []int) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(codec), &WriterOptions{BlockSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if slices.Contains(flushAfter, i) {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Add(time.Unix(0, r.t), r.headers, r.payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// failingWriter fails the writes numbered in fail (from 0), writing half of
// the bytes first, as a full disk does.
type failingWriter struct {
	buf  bytes.Buffer
	n    int
	fail map[int]bool
}

var errDiskFull = errors.New("disk full")

func (f *failingWriter) Write(p []byte) (int, error) {
	n := f.n
	f.n++
	if f.fail[n] {
		f.buf.Write(p[:len(p)/2])
		return len(p) / 2, errDiskFull
	}
	return f.buf.Write(p)
}

// TestWriterFailedWrite checks the Writer's promise: a failed write leaves
// its state as it was before the call, so truncating the destination to
// Size() and calling again loses and duplicates nothing.
func TestWriterFailedWrite(t *testing.T) {
	t.Parallel()
	recs := testRecords(500)
	// Records larger than a block are written as soon as they are added.
	for i := 0; i < len(recs); i += 25 {
		recs[i].payload = appendJSONRecord(nil, uint64(i), 5000+i)
	}
	for _, codec := range allCodecs {
		for _, bs := range []int{1000, 4096} {
			// Fail every third block write and then the footer once.
			fw := &failingWriter{fail: map[int]bool{}}
			for i := 1; i < 200; i += 3 {
				fw.fail[i] = true
			}
			w, err := NewWriter(fw, testHeader(codec), &WriterOptions{BlockSize: bs})
			if err != nil {
				t.Fatal(err)
			}
			retry := func(op func() error) {
				t.Helper()
				for tries := 0; ; tries++ {
					err := op()
					if err == nil {
						return
					}
					if !errors.Is(err, errDiskFull) || tries > 3 {
						t.Fatalf("%s: %v", codec, err)
					}
					fw.buf.Truncate(int(w.Size()))
				}
			}
			failures := 0
			for _, r := range recs {
				retry(func() error {
					err := w.Add(time.Unix(0, r.t), r.headers, r.payload)
					if err != nil {
						failures++
					}
					return err
				})
			}
			fw.fail[fw.n] = true
			retry(w.Close)
			if failures < 5 {
				t.Fatalf("%s: only %d failed writes", codec, failures)
			}
			if w.Size() != int64(fw.buf.Len()) {
				t.Fatalf("%s: Size() %d, wrote %d", codec, w.Size(), fw.buf.Len())
			}
			readAllRecords(t, fw.buf.Bytes(), recs)
		}
	}
}

// TestSeekPos resumes reading from Pos() after every record, with the same
// reader and with a new one, and checks exactly the rest comes back.
func TestSeekPos(t *testing.T) {
	t.Parallel()
	recs := testRecords(90)
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, &WriterOptions{BlockSize: 1000}, recs)
		open := func() *Reader {
			r, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: "seek"})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		if n := len(open().Footer().Blocks); n < 10 {
			t.Fatalf("%d blocks", n)
		}
		if p := open().Pos(); p != (Position{Offset: HeaderSize}) {
			t.Fatalf("Pos() of a new reader: %+v", p)
		}
		for k := 0; k <= len(recs); k++ {
			r := open()
			for i := range k {
				got, err := r.Next()
				if err != nil {
					t.Fatal(err)
				}
				checkRecord(t, got, uint64(i), &recs[i])
			}
			pos := r.Pos()
			if pos.Seq != uint64(k) {
				t.Fatalf("Pos() after %d records: %+v", k, pos)
			}
			if pos != r.Pos() {
				t.Fatal("Pos() changed the position")
			}
			// A new reader resumes there; so does this one after
			// reading on and seeking back.
			r2 := open()
			if err := r2.Seek(pos); err != nil {
				t.Fatal(err)
			}
			if r2.Pos() != pos {
				t.Fatalf("Pos() after Seek(%+v): %+v", pos, r2.Pos())
			}
			checkRest(t, r2, recs, k)
			checkRest(t, r, recs, k)
			if err := r.Seek(pos); err != nil {
				t.Fatal(err)
			}
			checkRest(t, r, recs, k)
		}
		// The zero Position is the start.
		r := open()
		checkRest(t, r, recs, 0)
		if err := r.Seek(Position{}); err != nil {
			t.Fatal(err)
		}
		checkRest(t, r, recs, 0)
		// Pos after NextBlock is the start of the next block.
		r = open()
		b0, err := r.NextBlock()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.NextBlock(); err != nil {
			t.Fatal(err)
		}
		if p := r.Pos(); p.Seq != uint64(b0.Count) || p.Offset != b0.End() {
			t.Fatalf("Pos() after NextBlock: %+v, want %d at %d", p, b0.Count, b0.End())
		}
		checkRest(t, r, recs, int(b0.Count))
		// Outside the blocks.
		for _, p := range []Position{{Offset: 1}, {Offset: HeaderSize - 1, Seq: 3}, {Offset: int64(len(data)), Seq: 0}, {Offset: -5}} {
			if err := open().Seek(p); err == nil {
				t.Fatalf("Seek(%+v) accepted a position outside the blocks", p)
			}
		}
		// A position inside a block that is not a block start: that
		// block is reported damaged and reading goes on with the next one.
		r = open()
		b := r.Footer().Blocks[3]
		if err := r.Seek(Position{Offset: b.Offset + 10, Seq: b.FirstSeq}); err != nil {
			t.Fatal(err)
		}
		_, err = r.Next()
		checkCorruptError(t, err, "seek")
		checkRest(t, r, recs, int(r.Footer().Blocks[4].FirstSeq))
	}
}

// checkRest reads r to the end, expecting recs[from:].
func checkRest(t testing.TB, r *Reader, recs []rec, from int) {
	t.Helper()
	for i := from; i < len(recs); i++ {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		checkRecord(t, got, uint64(i), &recs[i])
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v, want io.EOF", err)
	}
}

// TestSeekPosDamaged resumes reading a segment with damaged blocks, sealed
// and unsealed, from Pos() after every call of Next, and checks the resumed
// reader returns the same records as the one that goes on.
func TestSeekPosDamaged(t *testing.T) {
	t.Parallel()
	recs := testRecords(120)
	data := writeRecords(t, CodecS2, &WriterOptions{BlockSize: 1500}, recs)
	r0, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := r0.Footer().Blocks
	damaged := slices.Clone(data)
	damaged[blocks[2].Offset+70] ^= 1
	damaged[blocks[3].Offset+5] ^= 1
	damaged[blocks[7].Offset+BlockHeaderSize+3] ^= 1
	unsealed := damaged[:len(damaged)-3]
	for _, d := range [][]byte{damaged, unsealed} {
		open := func() *Reader {
			r, err := NewReader(bytes.NewReader(d), int64(len(d)), nil)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		all := readSeqs(open())
		want := 0
		for i, b := range blocks {
			if i != 2 && i != 3 && i != 7 {
				want += int(b.Count)
			}
		}
		if len(all) != want {
			t.Fatalf("read %d records, want %d", len(all), want)
		}
		r := open()
		for calls := 0; calls < 200; calls++ {
			pos := r.Pos()
			r2 := open()
			if err := r2.Seek(pos); err != nil {
				t.Fatal(err)
			}
			rest := readSeqs(r2)
			i, _ := slices.BinarySearch(all, pos.Seq)
			if !slices.Equal(rest, all[i:]) {
				t.Fatalf("resumed at %+v: %v, want %v", pos, rest, all[i:])
			}
			if _, err := r.Next(); err == io.EOF {
				break
			}
		}
	}
}

// readSeqs returns the sequence numbers of all the records r returns.
func readSeqs(r *Reader) []uint64 {
	var s []uint64
	for range 10000 {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err == nil {
			s = append(s, rec.Seq)
		}
	}
	return s
}

func TestFileName(t *testing.T) {
	t.Parallel()
	var names []string
	var times []time.Time
	for i, tm := range []time.Time{
		time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2025, 1, 2, 3, 4, 5, 1, time.UTC),
		time.Date(2025, 1, 2, 3, 4, 5, 999999999, time.UTC),
		time.Date(2025, 1, 2, 4, 4, 5, 0, time.FixedZone("CET", 3600)), // 03:04:05 UTC
		time.Date(1999, 12, 31, 23, 59, 59, 123456789, time.UTC),
		time.Date(2100, 6, 30, 0, 0, 0, 500, time.Local),
	} {
		id := NewID(tm)
		if ms := uint64(id[0])<<40 | uint64(id[1])<<32 | uint64(id[2])<<24 | uint64(id[3])<<16 | uint64(id[4])<<8 | uint64(id[5]); ms != uint64(tm.UnixMilli()) {
			t.Fatalf("NewID(%v) starts with %d ms, want %d", tm, ms, tm.UnixMilli())
		}
		name := FileName(tm, id)
		if !strings.HasSuffix(name, Ext) || !strings.Contains(name, id.String()[16:]) || len(id.String()) != 32 {
			t.Fatalf("FileName(%v, %v) = %q", tm, id, name)
		}
		got, ok := ParseFileName(name)
		if !ok || !got.Equal(tm) || got.Location() != time.UTC {
			t.Fatalf("ParseFileName(%q) = %v, %v; want %v", name, got, ok, tm.UTC())
		}
		names = append(names, fmt.Sprintf("%s#%d", name, i))
		times = append(times, tm)
	}
	// Names sort by creation time.
	sort.Strings(names)
	for i := 1; i < len(names); i++ {
		var a, b int
		fmt.Sscanf(names[i-1][strings.Index(names[i-1], "#")+1:], "%d", &a)
		fmt.Sscanf(names[i][strings.Index(names[i], "#")+1:], "%d", &b)
		if times[a].After(times[b]) {
			t.Fatalf("%s sorts before %s", names[i-1], names[i])
		}
	}
	if a, b := NewID(times[0]), NewID(times[0]); a == b {
		t.Fatal("two NewID calls gave the same ID")
	}
	good := FileName(times[0], NewID(times[0]))
	for _, bad := range []string{
		"", Ext, "x" + good, good[:len(good)-1], strings.TrimSuffix(good, Ext) + ".dlx",
		strings.Replace(good, "-", "_", 1), strings.Replace(good, "T", "X", 1),
		good[:len(good)-len(Ext)-1] + "g" + Ext, "20250102T030405.000000000Z-0123456789abcdef.txt",
		"20251302T030405.000000000Z-0123456789abcdef.dlq", "20250102T030405.000000000Z-0123456789abcdef0.dlq",
	} {
		if tm, ok := ParseFileName(bad); ok {
			t.Errorf("ParseFileName(%q) = %v, true", bad, tm)
		}
	}
	if _, ok := ParseFileName("20250102T030405.000000000Z-0123456789abcdef.dlq"); !ok {
		t.Error("ParseFileName rejects a valid name")
	}
}

func TestParseCodec(t *testing.T) {
	t.Parallel()
	for _, c := range allCodecs {
		got, err := ParseCodec(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCodec(%q) = %v, %v", c.String(), got, err)
		}
		got, err = ParseCodec(strings.ToUpper(c.String()))
		if err != nil || got != c {
			t.Errorf("ParseCodec(%q) = %v, %v", strings.ToUpper(c.String()), got, err)
		}
	}
	if got, err := ParseCodec(""); err != nil || got != CodecZstd {
		t.Errorf(`ParseCodec("") = %v, %v; want the default zstd`, got, err)
	}
	for _, bad := range []string{"gzip", "zstd ", "s3", "lz4", "NONE!"} {
		if _, err := ParseCodec(bad); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseCodec(%q): %v, want ErrFormat naming it", bad, err)
		}
	}
	if s := Codec(7).String(); s != "codec(7)" {
		t.Errorf("Codec(7).String() = %q", s)
	}
	if _, err := NewWriter(io.Discard, Header{Codec: 3}, nil); !errors.Is(err, ErrFormat) {
		t.Errorf("NewWriter with codec 3: %v, want ErrFormat", err)
	}
	if _, err := NewCompressor(9, 0); !errors.Is(err, ErrFormat) {
		t.Errorf("NewCompressor(9): %v, want ErrFormat", err)
	}
	for _, c := range allCodecs {
		for _, level := range []int{0, 1, 2, 3, 7, 19} {
			comp, err := NewCompressor(c, level)
			if err != nil || comp.Codec() != c {
				t.Errorf("NewCompressor(%v, %d): %v", c, level, err)
			}
		}
	}
}

// headersOf returns the Headers view of the encoding of m.
func headersOf(m map[string]string) Headers {
	enc := AppendHeaders(nil, m)
	return Headers{n: len(m), b: enc[uvarintLen(uint64(len(m))):]}
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range 200 {
		many[fmt.Sprintf("key-%03d", i)] = strings.Repeat("v", i)
	}
	for _, m := range []map[string]string{
		nil,
		{},
		{"reason": "timeout"},
		{"reason": "timeout", "source": "orders", "attempts": "3"},
		{"": "", "a": "", "long": strings.Repeat("é", 300)},
		{"z": "1", "y": "2", "x": "3", "w": "4", "v": "5", "u": "6", "t": "7", "s": "8", "r": "9", "q": "10"},
		many,
	} {
		h := headersOf(m)
		checkHeadersView(t, h, m)
		// Stored sorted by key.
		var keys []string
		for k := range h.All() {
			keys = append(keys, k)
		}
		if !slices.IsSorted(keys) {
			t.Fatalf("keys not sorted: %v", keys)
		}
		// All stops when told to.
		n := 0
		for range h.All() {
			n++
			if n == 2 {
				break
			}
		}
		if n != min(2, len(m)) {
			t.Fatalf("All did not stop: %d", n)
		}
		// Round trip through a segment, and through Copy.
		data := writeRecords(t, CodecNone, nil, []rec{{t: 1, headers: m, payload: []byte("p")}})
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		checkHeadersView(t, got.Headers, m)
	}
	if enc := AppendHeaders([]byte("x"), nil); string(enc) != "x\x00" {
		t.Fatalf("AppendHeaders(nil) = %q, want a single zero byte", enc)
	}
	if enc := AppendHeaders(nil, map[string]string{"b": "2", "a": "1"}); string(enc) != "\x02\x01a\x011\x01b\x012" {
		t.Fatalf("AppendHeaders = %q", enc)
	}
}

func TestAppendHeaderPairs(t *testing.T) {
	for _, kv := range [][]string{
		nil,
		{"reason", "timeout"},
		{"attempts", "3", "reason", "timeout", "source", "orders"},
		{"", "", "a", strings.Repeat("x", 200)},
	} {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		got := AppendHeaderPairs([]byte("prefix"), kv...)
		want := AppendHeaders([]byte("prefix"), m)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendHeaderPairs(%q) = %q, AppendHeaders gives %q", kv, got, want)
		}
		checkHeadersView(t, Headers{n: len(m), b: got[len("prefix")+1:]}, m)
		buf := make([]byte, 0, 1024)
		if n := testing.AllocsPerRun(100, func() { buf = AppendHeaderPairs(buf[:0], kv...) }); n != 0 {
			t.Fatalf("AppendHeaderPairs allocates %v times", n)
		}
	}
	// An odd count drops the key without a value.
	if got, want := AppendHeaderPairs(nil, "a", "1", "b"), AppendHeaderPairs(nil, "a", "1"); !bytes.Equal(got, want) {
		t.Fatalf("AppendHeaderPairs with an odd count = %q, want %q", got, want)
	}
}

// TestWriterCopy copies records between segments, with and without extra
// headers.
func TestWriterCopy(t *testing.T) {
	t.Parallel()
	recs := testRecords(500)
	src := writeRecords(t, CodecZstd, &WriterOptions{BlockSize: 3000}, recs)
	extra := map[string]string{"copied": "yes", "reason": "replaced"}
	for _, ex := range []map[string]string{nil, extra} {
		r, err := NewReader(bytes.NewReader(src), int64(len(src)), nil)
		if err != nil {
			t.Fatal(err)
		}
		copied := copyRecords(t, r, ex)
		want := slices.Clone(recs)
		for i := range want {
			if ex != nil {
				m := map[string]string{}
				for k, v := range want[i].headers {
					m[k] = v
				}
				for k, v := range ex {
					m[k] = v
				}
				want[i].headers = m
			}
		}
		readAllRecords(t, copied, want)
	}
}

func TestWriterLimits(t *testing.T) {
	t.Parallel()
	w, err := NewWriter(io.Discard, Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := w.Header()
	if h.Created.IsZero() || h.ID == (ID{}) || h.FormatVersion != FormatVersion || h.Codec != CodecNone {
		t.Fatalf("default header %+v", h)
	}
	if err := w.AddRecord(1, make([]byte, MaxRecordSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("AddRecord over the cap: %v, want ErrTooLarge", err)
	}
	if w.Records() != 0 || w.Size() != HeaderSize {
		t.Fatalf("a refused record was written")
	}
	if got := w.SealedSize(0); got != HeaderSize+footerSize(0) {
		t.Fatalf("SealedSize(0) = %d", got)
	}
	if got := w.SealedSize(100); got != HeaderSize+100+footerSize(1) {
		t.Fatalf("SealedSize(100) = %d", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != ErrClosed {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Flush(); err != ErrClosed {
		t.Fatalf("Flush after Close: %v", err)
	}
	if err := w.WriteBlock(&EncodedBlock{}); err != ErrClosed {
		t.Fatalf("WriteBlock after Close: %v", err)
	}
	if w.Size() != HeaderSize+footerSize(0) {
		t.Fatalf("empty sealed segment of %d bytes", w.Size())
	}
}

// TestEmptySegment reads a sealed segment without records.
func TestEmptySegment(t *testing.T) {
	t.Parallel()
	data := writeRecords(t, CodecZstd, nil, nil)
	if len(data) != HeaderSize+int(footerSize(0)) {
		t.Fatalf("empty segment of %d bytes", len(data))
	}
	r := readAllRecords(t, data, nil)
	if ft := r.Footer(); len(ft.Blocks) != 0 || !ft.MinTime.IsZero() || ft.Sealed.IsZero() {
		t.Fatalf("footer %+v", ft)
	}
	if _, err := r.NextBlock(); err != io.EOF {
		t.Fatalf("NextBlock: %v", err)
	}
	res, err := Scan(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil || !res.Sealed || res.End != HeaderSize || res.Damage != nil {
		t.Fatalf("Scan: %+v, %v", res, err)
	}
}

// TestBlockPipeline builds blocks with BlockBuilder and Compressor, as the
// dumper does, and writes them with WriteBlock.
func TestBlockPipeline(t *testing.T) {
	t.Parallel()
	recs := testRecords(1000)
	for _, codec := range allCodecs {
		for _, level := range []int{1, 2, 3} {
			comp, err := NewCompressor(codec, level)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, err := NewWriter(&buf, testHeader(codec), nil)
			if err != nil {
				t.Fatal(err)
			}
			var bb BlockBuilder
			var eb EncodedBlock
			var body []byte
			flush := func() {
				comp.Encode(&eb, &bb)
				if eb.Count() != bb.Count() || eb.RawLen() != bb.Len() || eb.MinTime() > bb.FirstTime() {
					t.Fatalf("encoded block: %d records, %d raw bytes, min time %d; builder: %d, %d, first %d",
						eb.Count(), eb.RawLen(), eb.MinTime(), bb.Count(), bb.Len(), bb.FirstTime())
				}
				before := w.Size()
				if err := w.WriteBlock(&eb); err != nil {
					t.Fatal(err)
				}
				if w.Size() != before+int64(eb.Len()) {
					t.Fatalf("WriteBlock wrote %d bytes, Len() %d", w.Size()-before, eb.Len())
				}
				bb.Reset(bb.Raw())
				if bb.Count() != 0 || bb.Len() != 0 || bb.FirstTime() != 0 {
					t.Fatal("Reset left records")
				}
			}
			for i, r := range recs {
				body = append(AppendHeaders(body[:0], r.headers), r.payload...)
				if bb.Count() > 0 && bb.Len()+RecordSize(len(body)) > 10000 {
					flush()
				}
				before := bb.Len()
				bb.Add(r.t, body)
				if n := bb.Len() - before; n > RecordSize(len(body)) {
					t.Fatalf("record %d took %d bytes, RecordSize says at most %d", i, n, RecordSize(len(body)))
				}
			}
			flush()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			readAllRecords(t, buf.Bytes(), recs)
		}
	}
}

// TestHugeBlockSize checks that a block size over the readers' cap still
// makes blocks a reader with the default cap accepts.
func TestHugeBlockSize(t *testing.T) {
	t.Parallel()
	buf := bytes.NewBuffer(make([]byte, 0, 80<<20))
	w, err := NewWriter(buf, testHeader(CodecNone), &WriterOptions{BlockSize: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	body := AppendHeaders(nil, map[string]string{"big": "yes"})
	body = append(body, make([]byte, 24<<20)...)
	for i := range 3 {
		body[len(body)-1] = byte(i)
		if err := w.AddRecord(int64(i), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.Seq != uint64(i) || len(rec.Payload) != 24<<20 || rec.Payload[len(rec.Payload)-1] != byte(i) {
			t.Fatalf("record %d: seq %d, %d bytes", i, rec.Seq, len(rec.Payload))
		}
		if r.Block().RawLen > MaxBlockSize {
			t.Fatalf("block of %d raw bytes, over MaxBlockSize", r.Block().RawLen)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last record: %v", err)
	}
}

// TestFooterIndex checks the footer's index against the blocks.
func TestFooterIndex(t *testing.T) {
	t.Parallel()
	recs := testRecords(300)
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, &WriterOptions{BlockSize: 3000}, recs)
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatal(err)
		}
		ft := r.Footer()
		var raw, stored uint64
		for i := 0; ; i++ {
			b, err := r.NextBlock()
			if err == io.EOF {
				if i != len(ft.Blocks) {
					t.Fatalf("%s: %d blocks, the footer lists %d", codec, i, len(ft.Blocks))
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			want := b
			want.Codec = 0 // not in the index
			if ft.Blocks[i] != want {
				t.Fatalf("%s: footer index entry %d: %+v, block %+v", codec, i, ft.Blocks[i], b)
			}
			if b.Codec != codec {
				t.Fatalf("%s: block %d stored with %s", codec, i, b.Codec)
			}
			raw += uint64(b.RawLen)
			stored += uint64(b.StoredLen)
		}
		if ft.RawBytes != raw || ft.StoredBytes != stored || ft.Records != uint64(len(recs)) {
			t.Fatalf("%s: footer totals %+v, blocks hold %d raw and %d stored bytes", codec, ft, raw, stored)
		}
		if ft.Sealed.Before(time.Now().Add(-time.Hour)) || ft.Sealed.After(time.Now().Add(time.Minute)) {
			t.Fatalf("%s: sealed at %v", codec, ft.Sealed)
		}
	}
}

// TestCraftedFooter reads segments whose footer has a valid checksum but
// does not describe the blocks: the segment counts as unsealed, and all
// its blocks are read.
func TestCraftedFooter(t *testing.T) {
	t.Parallel()
	recs := testRecords(100)
	data, w := unsealedSegment(t, CodecS2, 1500, recs)
	footer := func(change func(index []BlockInfo) ([]BlockInfo, uint64)) []byte {
		index, records := change(slices.Clone(w.index))
		return append(slices.Clone(data), appendFooter(nil, index, records, w.raw, w.stored, w.min, w.max, time.Now(), 0)...)
	}
	n := uint64(len(recs))
	cases := map[string][]byte{
		"too many records": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) { return ix, n + 1 }),
		"first block not after the header": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
			ix[0].Offset++
			return ix, n
		}),
		"block too short": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
			ix[2].Offset = ix[1].Offset + BlockHeaderSize
			return ix, n
		}),
		"offsets not increasing": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
			ix[1], ix[2] = ix[2], ix[1]
			return ix, n
		}),
		"sequence gap": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
			ix[3].FirstSeq++
			return ix, n
		}),
		"block missing": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
			c := ix[1].Count
			ix = slices.Delete(ix, 1, 2)
			for i := 1; i < len(ix); i++ {
				ix[i].FirstSeq -= uint64(c)
			}
			return ix, n - uint64(c)
		}),
		"raw length smaller than stored": footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
			ix[1].RawLen = 10
			return ix, n
		}),
	}
	for name, d := range cases {
		r, err := NewReader(bytes.NewReader(d), int64(len(d)), &ReaderOptions{Name: name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Sealed() {
			t.Errorf("%s: a footer that does not match the blocks counts as sealed", name)
			continue
		}
		if ce := checkCorruptError(t, r.FooterError(), name); !errors.Is(ce, ErrCorrupt) || ce.Block != -1 {
			t.Errorf("%s: footer error %v", name, ce)
		}
		// Every block is read; the footer is reported as damage.
		got, errs := 0, 0
		for range 1000 {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				checkCorruptError(t, err, name)
				errs++
				continue
			}
			checkRecord(t, rec, uint64(got), &recs[got])
			got++
		}
		if got != len(recs) || errs != 1 {
			t.Errorf("%s: %d records and %d errors, want %d and 1", name, got, errs, len(recs))
		}
	}
	// A footer whose index lists a block other than the one at its place
	// (here: claiming a different record count, consistently) is caught
	// when the block is read.
	d := footer(func(ix []BlockInfo) ([]BlockInfo, uint64) {
		ix[1].Count--
		for i := 2; i < len(ix); i++ {
			ix[i].FirstSeq--
		}
		return ix, n - 1
	})
	r, err := NewReader(bytes.NewReader(d), int64(len(d)), &ReaderOptions{Name: "index"})
	if err != nil || !r.Sealed() {
		t.Fatalf("consistent footer: sealed %v, %v", r != nil && r.Sealed(), err)
	}
	var errs int
	for range 1000 {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The first damage is block 1; the blocks after it do not
			// have the sequence numbers the index gives them either.
			if ce := checkCorruptError(t, err, "index"); errs == 0 && (ce.Block != 1 || ce.Offset != w.index[1].Offset) {
				t.Fatalf("first error %v at block %d offset %d, want block 1 at %d", err, ce.Block, ce.Offset, w.index[1].Offset)
			}
			errs++
		}
	}
	if errs == 0 {
		t.Fatal("a block that does not match the footer's index was accepted")
	}
}
