package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/gen"
)

// summaryRecs returns n records: a few reasons (an exact set), a unique
// order id header (many values), JSON payloads with a unique id and a
// random token each (as real dead letters have: they compress 3-4x, not
// 10x), one payload with an escape every 97 records.
func summaryRecs(n int) []rec {
	reasons := []string{"failed", "leak", "deadline"}
	recs := make([]rec, n)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range recs {
		p := fmt.Sprintf(`{"order":"ord-%07d","token":"%016x","user":{"email":"u%d@example.com"},"note":"the order was delayed"}`, i*7, rng.Uint64(), i%1000)
		if i%97 == 0 {
			p = fmt.Sprintf(`{"order":"ord-%07d","note":"caf\u00e9 \"quoted\""}`, i*7)
		}
		if i == n-1 {
			p = fmt.Sprintf(`{"order":"ord-%07d","note":"needle-7f3a9c"}`, i*7)
		}
		recs[i] = rec{t: base + int64(i)*1e6, headers: map[string]string{"reason": reasons[i%3], "order": fmt.Sprintf("o%d", i)}, payload: []byte(p)}
	}
	return recs
}

func openSummary(t *testing.T, data []byte, opts *ReaderOptions) (*Reader, *Summary) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Summary()
	if err != nil {
		t.Fatal(err)
	}
	if s == nil {
		t.Fatal("no summary")
	}
	return r, s
}

func TestSummaryRoundTrip(t *testing.T) {
	recs := summaryRecs(20000)
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			data := writeRecords(t, codec, &WriterOptions{Summarize: true, BlockSize: 64 << 10}, recs)
			r := readAllRecords(t, data, recs) // the records read as before
			if !r.Header().Summarized {
				t.Fatal("the header does not say Summarized")
			}
			_, s := openSummary(t, data, &ReaderOptions{Name: "test"})
			ft := r.Footer()
			if s.Blocks() != len(ft.Blocks) || s.Blocks() < 20 {
				t.Fatalf("summary of %d blocks, footer %d", s.Blocks(), len(ft.Blocks))
			}
			if int64(s.Size()) != ft.SummaryBytes {
				t.Fatalf("Size %d, footer says %d", s.Size(), ft.SummaryBytes)
			}
			vals, exact, present := s.Values("reason")
			if !exact || !present || len(vals) != 3 {
				t.Fatalf("Values(reason) = %v %v %v", vals, exact, present)
			}
			if _, exact, present := s.Values("order"); exact || !present {
				t.Fatalf("Values(order): exact %v present %v, want a filter", exact, present)
			}
			if _, exact, present := s.Values("nope"); !exact || present {
				t.Fatalf("Values(nope): exact %v present %v, want absent", exact, present)
			}
			if !s.MayHave("reason", "leak") || s.MayHave("reason", "other") || s.MayHave("nope", "x") || !s.MayHaveKey("order") || s.MayHaveKey("nope") {
				t.Fatal("segment-level answers wrong")
			}
			// No false negatives: every record's headers and payload
			// pieces may match in its own block.
			blockOf := func(seq int) int {
				for i, b := range ft.Blocks {
					if uint64(seq) < b.FirstSeq+uint64(b.Count) {
						return i
					}
				}
				t.Fatalf("no block holds %d", seq)
				return -1
			}
			for i, rc := range recs {
				if i%7 != 0 && i < len(recs)-1 {
					continue // a sample is enough here; TestSummaryNoFalseNegatives tries everything
				}
				b := blockOf(i)
				for k, v := range rc.headers {
					if !s.BlockMayHave(b, k, v) || !s.BlockMayHaveKey(b, k) || !s.MayHave(k, v) {
						t.Fatalf("record %d: %s=%s said absent from its block %d", i, k, v, b)
					}
				}
				for _, n := range []int{3, 5, 11} {
					j := (i * 31) % (len(rc.payload) - n)
					if !s.BlockMayContain(b, rc.payload[j:j+n], false) {
						t.Fatalf("record %d: %q said absent from its block %d", i, rc.payload[j:j+n], b)
					}
				}
			}
			// A JSON value's text in a block with escapes may match.
			if !s.BlockMayContain(0, []byte("café"), true) {
				t.Fatal("block 0 has an escaped payload: a JSON value's text must may-match")
			}
		})
	}
}

// TestSummarySelective writes 50,000 realistic dead letters (gen's
// ~300-byte JSON events, four headers, one of them unique per record) as
// the dumper does, and checks what their summaries cost and rule out: a
// rare header value, a rare payload text and a rare JSON value each may
// match in few of the 71 blocks.
func TestSummarySelective(t *testing.T) {
	g := gen.New(1)
	reasons := []string{"failed", "leak", "deadline"}
	errs := []string{"timeout after 5s", "connection reset by peer", "503 service unavailable", "invalid currency"}
	recs := make([]rec, 50000)
	for i := range recs {
		recs[i] = rec{t: int64(i), headers: map[string]string{"reason": reasons[i%3], "error": errs[i%4], "source": "orders", "n": fmt.Sprint(i)}, payload: g.Event(300)}
	}
	recs[49998].payload = []byte(`{"id":"evt_1","oncall_note":"needle-7f3a9c","user":{"email":"on.call@example.com"}}`)
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, &WriterOptions{Summarize: true}, recs)
		r, s := openSummary(t, data, nil)
		ft := r.Footer()
		var header, text, json int
		for b := range s.Blocks() {
			if s.BlockMayHave(b, "n", "49998") {
				header++
			}
			if s.BlockMayContain(b, []byte("needle-7f3a9c"), false) {
				text++
			}
			if s.BlockMayContain(b, []byte("on.call@example.com"), true) {
				json++
			}
		}
		share := float64(s.Size()) / float64(ft.StoredBytes)
		t.Logf("%s: %d blocks, %d bytes stored, summary %d bytes (%.1f%%); may match: rare header %d, rare text %d, rare JSON value %d",
			codec, s.Blocks(), ft.StoredBytes, s.Size(), 100*share, header, text, json)
		if header > 4 || text > 2 || json > 2 || share > 1.0/16 {
			t.Errorf("%s: the summary costs %.1f%% and lets through %d, %d and %d of %d blocks", codec, 100*share, header, text, json, s.Blocks())
		}
	}
}

// TestSummaryNoFalseNegatives writes random records and checks that every
// header value and every substring of every payload may match in its block.
func TestSummaryNoFalseNegatives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		n := 1 + rng.IntN(400)
		recs := make([]rec, n)
		for i := range recs {
			p := make([]byte, rng.IntN(200))
			for j := range p {
				p[j] = byte(rng.IntN(256))
			}
			h := map[string]string{}
			for range rng.IntN(5) {
				h[fmt.Sprint("k", rng.IntN(300))] = fmt.Sprint(rng.IntN(1000))
			}
			recs[i] = rec{t: int64(i), headers: h, payload: p}
		}
		data := writeRecords(t, CodecS2, &WriterOptions{Summarize: true, BlockSize: 1 + rng.IntN(8<<10)}, recs)
		r, s := openSummary(t, data, nil)
		ft := r.Footer()
		for b, bi := range ft.Blocks {
			for seq := bi.FirstSeq; seq < bi.FirstSeq+uint64(bi.Count); seq++ {
				rc := recs[seq]
				for k, v := range rc.headers {
					if !s.BlockMayHave(b, k, v) || !s.MayHave(k, v) {
						t.Fatalf("round %d record %d: %s=%s said absent", round, seq, k, v)
					}
				}
				for j := 0; j+3 <= len(rc.payload); j++ {
					end := min(len(rc.payload), j+3+rng.IntN(10))
					if !s.BlockMayContain(b, rc.payload[j:end], false) {
						t.Fatalf("round %d record %d: %q said absent", round, seq, rc.payload[j:end])
					}
				}
			}
		}
	}
}

func TestSummaryAbsent(t *testing.T) {
	recs := summaryRecs(10)
	data := writeRecords(t, CodecZstd, nil, recs)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.Summary(); s != nil || err != nil {
		t.Fatalf("Summary of a segment written without one: %v, %v", s, err)
	}
	if r.Header().Summarized || r.Footer().SummaryBytes != 0 {
		t.Fatal("header or footer says summarized")
	}
	// A nil Summary says "may" to everything.
	var s *Summary
	if !s.MayHave("a", "b") || !s.BlockMayContain(3, []byte("xyz"), false) || !s.BlockMayHave(0, "a", "b") || !s.MayHaveKey("a") {
		t.Fatal("a nil Summary said no")
	}
}

func TestSummaryDamaged(t *testing.T) {
	recs := summaryRecs(300)
	data := writeRecords(t, CodecZstd, &WriterOptions{Summarize: true, BlockSize: 4 << 10}, recs)
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: "seg"})
	if err != nil {
		t.Fatal(err)
	}
	off := r.end + 20 // inside the summary's body
	bad := bytes.Clone(data)
	bad[off] ^= 0x40
	r2, err := NewReader(bytes.NewReader(bad), int64(len(bad)), &ReaderOptions{Name: "seg"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := r2.Summary()
	if s != nil {
		t.Fatal("a damaged summary was used")
	}
	ce := checkCorruptError(t, err, "seg")
	if ce.Offset != r.end || ce.Block != -1 {
		t.Fatalf("damage at %d block %d, want %d -1", ce.Offset, ce.Block, r.end)
	}
	// The records still read, every one.
	readAllRecords(t, bad, recs)
}

func TestSummaryEncrypted(t *testing.T) {
	recs := summaryRecs(500)
	key := testDataKey("summary")
	data := writeRecords(t, CodecZstd, &WriterOptions{Summarize: true, Key: key, BlockSize: 8 << 10}, recs)
	if bytes.Contains(data, []byte("deadline")) || bytes.Contains(data, []byte("reason")) {
		t.Fatal("the summary of an encrypted segment shows header values")
	}
	_, s := openSummary(t, data, &ReaderOptions{Keys: testKeys{key}})
	if !s.MayHave("reason", "deadline") || s.MayHave("reason", "nope") {
		t.Fatal("the sealed summary does not read back")
	}
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Name: "enc"})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.Summary(); s != nil || !errors.Is(err, ErrNoKey) {
		t.Fatalf("without the key: %v, %v; want ErrNoKey", s, err)
	}
	// Rewrapped: the sealed summary is copied and still opens; the copy
	// keeps the records' IDs.
	var out bytes.Buffer
	rk, err := NewReader(bytes.NewReader(data), int64(len(data)), &ReaderOptions{Keys: testKeys{key}})
	if err != nil {
		t.Fatal(err)
	}
	key2 := &DataKey{Key: key.Key, Wrapped: []byte("test-wrap:other")}
	id := NewID(time.Now())
	if _, err := Rewrap(&out, rk, id, time.Now(), key2.Wrapped); err != nil {
		t.Fatal(err)
	}
	rc, s2 := openSummary(t, out.Bytes(), &ReaderOptions{Keys: testKeys{key2}})
	if !s2.MayHave("reason", "deadline") || s2.MayHave("reason", "nope") {
		t.Fatal("the rewrapped summary does not read back")
	}
	h, hc := rk.Header(), rc.Header()
	if hc.ID == h.ID || hc.Origin() != h.Origin() || hc.CopyOf != h.Origin() {
		t.Fatalf("rewrapped: ID %s origin %s copyOf %s; original ID %s origin %s", hc.ID, hc.Origin(), hc.CopyOf, h.ID, h.Origin())
	}
	rec0, err := rc.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hc.RecordID(&rec0), (RecordID{Origin: h.Origin(), Seq: 0}); got != want {
		t.Fatalf("rewrapped record 0 has ID %s, want %s", got, want)
	}
}

// TestSummaryTruncated writes blocks, cuts the last off as after a failed
// write and writes others: the summary describes the blocks kept.
func TestSummaryTruncated(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(CodecZstd), &WriterOptions{Summarize: true})
	if err != nil {
		t.Fatal(err)
	}
	comp, err := NewCompressor(CodecZstd, 0)
	if err != nil {
		t.Fatal(err)
	}
	block := func(payload string) *EncodedBlock {
		var bb BlockBuilder
		bb.Add(1, append(AppendHeaders(nil, map[string]string{"k": payload}), payload...))
		var e EncodedBlock
		comp.Encode(&e, &bb)
		e.Summarize(&bb)
		return &e
	}
	if err := w.WriteBlock(block("first-block")); err != nil {
		t.Fatal(err)
	}
	size := w.Size()
	if err := w.WriteBlock(block("cut-off")); err != nil {
		t.Fatal(err)
	}
	if err := w.Truncate(size); err != nil {
		t.Fatal(err)
	}
	buf.Truncate(int(size))
	if err := w.WriteBlock(block("third-block")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, s := openSummary(t, buf.Bytes(), nil)
	if s.Blocks() != 2 || !s.BlockMayContain(1, []byte("third-block"), false) || !s.BlockMayContain(0, []byte("first"), false) {
		t.Fatalf("summary of %d blocks does not describe the blocks kept", s.Blocks())
	}
	// A block given without a summary: no summary at all.
	buf.Reset()
	w, _ = NewWriter(&buf, testHeader(CodecZstd), &WriterOptions{Summarize: true})
	e := block("x")
	e.sum.valid = false
	if err := w.WriteBlock(e); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.Summary(); s != nil || err != nil {
		t.Fatalf("a segment with a block not summarized has a summary: %v %v", s, err)
	}
}

// TestSummaryBudget writes a segment of tiny, varied records whose filters
// exceed the budget: they are folded to fit it, and still never say no to
// what is there.
func TestSummaryBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := make([]rec, 20000)
	for i := range recs {
		p := make([]byte, 40)
		for j := range p {
			p[j] = 'a' + byte(rng.IntN(26))
		}
		recs[i] = rec{t: int64(i), headers: map[string]string{"id": fmt.Sprint(i)}, payload: p}
	}
	data := writeRecords(t, CodecNone, &WriterOptions{Summarize: true, BlockSize: 1 << 10}, recs)
	r, s := openSummary(t, data, nil)
	ft := r.Footer()
	if budget := summaryBudget(ft.StoredBytes); s.Size() > budget {
		t.Fatalf("summary of %d bytes, budget %d", s.Size(), budget)
	}
	for b, bi := range ft.Blocks {
		seq := bi.FirstSeq
		if !s.BlockMayContain(b, recs[seq].payload[5:20], false) || !s.BlockMayHave(b, "id", fmt.Sprint(seq)) {
			t.Fatalf("block %d: record %d said absent after folding", b, seq)
		}
	}
}

func TestHeaderFlags(t *testing.T) {
	h := testHeader(CodecZstd)
	h.FormatVersion, h.Summarized = FormatVersion, true
	h.CopyOf = Origin{1, 2, 3}
	b := make([]byte, HeaderSize)
	h.marshal(b, HeaderSize)
	got, _, err := unmarshalHeader(b)
	if err != nil || !got.Summarized || got.CopyOf != h.CopyOf || got.Origin() != h.CopyOf {
		t.Fatalf("header read back %+v, %v", got, err)
	}
	b[11] |= 4 // a flag no reader knows
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castag))
	if _, _, err := unmarshalHeader(b); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "flags 0x4") {
		t.Fatalf("unknown flag: %v", err)
	}
}

// BenchmarkSummarize summarizes blocks of realistic dead letters (gen's
// ~300-byte JSON events, three headers as the dumper's benchmarks have):
// the work a dumper's compressors add per block, to set against
// BenchmarkCompress's.
func BenchmarkSummarize(b *testing.B) {
	g := gen.New(1)
	reasons := []string{"failed", "leak", "deadline"}
	var bb BlockBuilder
	var blocks []BlockBuilder
	for i := range 8000 {
		h := map[string]string{"reason": reasons[i%3], "error": fmt.Sprintf("timeout after %dms", i%500), "source": "orders"}
		body := append(AppendHeaders(nil, h), g.Event(300)...)
		if bb.Len()+len(body) > DefaultBlockSize {
			blocks = append(blocks, bb)
			bb = BlockBuilder{}
		}
		bb.Add(int64(i), body)
	}
	blocks = append(blocks, bb)
	var e EncodedBlock
	var raw int
	for _, b := range blocks {
		raw += b.Len()
	}
	b.SetBytes(int64(raw))
	for b.Loop() {
		for i := range blocks {
			e.Summarize(&blocks[i])
		}
	}
}

// TestSummaryMaxSize: a Writer with MaxSize makes its summary smaller, or
// leaves it out, so that the sealed segment fits, as SealedSizeOf said.
func TestSummaryMaxSize(t *testing.T) {
	recs := summaryRecs(400)
	comp, err := NewCompressor(CodecNone, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, max := range []int64{2000, 9000, 20000, 1 << 20} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(CodecNone), &WriterOptions{Summarize: true, MaxSize: max})
		if err != nil {
			t.Fatal(err)
		}
		var bb BlockBuilder
		var e EncodedBlock
		written := 0
		for i, r := range recs {
			bb.Add(r.t, append(AppendHeaders(nil, r.headers), r.payload...))
			if bb.Len() < 1500 && i < len(recs)-1 {
				continue
			}
			comp.Encode(&e, &bb)
			e.Summarize(&bb)
			bb.Reset(nil)
			if written > 0 && w.SealedSizeOf(&e) > max {
				break
			}
			if err := w.WriteBlock(&e); err != nil {
				t.Fatal(err)
			}
			written++
		}
		want := w.SealedSize(0)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if int64(buf.Len()) > want || written > 1 && int64(buf.Len()) > max {
			t.Fatalf("MaxSize %d: %d blocks, sealed %d bytes, SealedSize said %d", max, written, buf.Len(), want)
		}
	}
}

// TestAddSummary copies segments written without a summary into ones with
// it: the same blocks at the same offsets (a position stays valid), the
// same record IDs, a summary that rules out what is not there; for an
// encrypted one, sealed and read with the key.
func TestAddSummary(t *testing.T) {
	recs := summaryRecs(3000)
	key := testDataKey("add")
	for _, opts := range []*WriterOptions{{BlockSize: 16 << 10}, {BlockSize: 16 << 10, Key: key}} {
		data := writeRecords(t, CodecZstd, opts, recs)
		ro := &ReaderOptions{Keys: testKeys{key}}
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), ro)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		id := NewID(time.Now())
		if err := AddSummary(&out, r, id, r.Header().Created); err != nil {
			t.Fatal(err)
		}
		c, s := openSummary(t, out.Bytes(), ro)
		h, hc := r.Header(), c.Header()
		if hc.ID != id || hc.Origin() != h.Origin() || !hc.Summarized || hc.Encrypted != h.Encrypted {
			t.Fatalf("the copy's header %+v", hc)
		}
		if !bytes.Equal(out.Bytes()[c.Start():c.end], data[r.Start():r.end]) {
			t.Fatal("the blocks are not copied byte for byte")
		}
		readAllRecordsOpts(t, out.Bytes(), recs, ro)
		if !s.MayHave("reason", "leak") || s.MayHave("reason", "nope") || s.Blocks() != len(c.Footer().Blocks) {
			t.Fatal("the added summary does not describe the records")
		}
		if !s.BlockMayContain(s.Blocks()-1, []byte("needle-7f3a9c"), false) {
			t.Fatal("the last block's summary lacks its needle")
		}
		// Without the key, an encrypted one is not summarized.
		if opts.Key != nil {
			r, _ := NewReader(bytes.NewReader(data), int64(len(data)), nil)
			if err := AddSummary(io.Discard, r, id, time.Now()); !errors.Is(err, ErrNoKey) {
				t.Fatalf("without the key: %v", err)
			}
		}
	}
}

// readCounter counts the bytes read through ReadAt.
type readCounter struct {
	r *bytes.Reader
	n int
}

func (c *readCounter) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += n
	return n, err
}

// The summary of a segment the Reader read whole when it opened it (one
// read of up to 256 KiB) is taken from those bytes, not read again: a
// restore job's plan of a small segment read its summary twice (the
// segment, then its summary: 1.25 times its bytes).
func TestSummaryOfASmallSegmentIsNotReadAgain(t *testing.T) {
	recs := summaryRecs(500)
	data := writeRecords(t, CodecNone, &WriterOptions{Summarize: true, BlockSize: 16 << 10}, recs)
	if len(data) > readAhead {
		t.Fatalf("a segment of %d bytes: not small", len(data))
	}
	c := &readCounter{r: bytes.NewReader(data)}
	r, err := NewReader(c, int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Summary()
	if err != nil || s == nil || s.Blocks() != len(r.Footer().Blocks) {
		t.Fatalf("summary %v, %v", s, err)
	}
	if c.n != len(data) {
		t.Errorf("opening the segment and reading its summary read %d bytes, the segment has %d", c.n, len(data))
	}
	vals, exact, present := s.Values("reason")
	if !exact || !present || len(vals) != 3 {
		t.Fatalf("Values(reason) = %v %v %v", vals, exact, present)
	}
}
