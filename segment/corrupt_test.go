package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"testing"
)

// sweepSegment is a small sealed multi-block segment and what it holds, to
// damage in every way and check what a Reader makes of it.
type sweepSegment struct {
	name   string
	data   []byte
	recs   []rec
	blocks []blockSpan
	footer int64 // offset of the footer
	start  int64 // where blocks start (after the key section when encrypted)
	keys   KeyUnwrapper

	sealChecked map[int64]bool // prefixes Seal was checked on
}

// blockSpan is where a block lies and which records it holds, from the
// footer index of the intact segment.
type blockSpan struct {
	off, end int64
	first    uint64
	count    int
}

func newSweepSegment(t testing.TB, codec Codec) *sweepSegment {
	t.Helper()
	return newSweepSegmentKey(t, codec, nil, nil)
}

// newSweepSegmentKey is newSweepSegment, encrypted with key (nil: not
// encrypted), read with keys.
func newSweepSegmentKey(t testing.TB, codec Codec, key *DataKey, keys KeyUnwrapper) *sweepSegment {
	t.Helper()
	var recs []rec
	for i := range 32 {
		h, _ := smallHeaders(uint64(i))
		recs = append(recs, rec{t: smallTime(uint64(i)).UnixNano(), headers: h, payload: smallPayload(nil, uint64(i)*7919)})
	}
	s := &sweepSegment{name: "sweep-" + codec.String() + Ext, recs: recs, sealChecked: map[int64]bool{}, keys: keys}
	s.data = writeRecords(t, codec, &WriterOptions{BlockSize: 800, Key: key}, recs)
	r, err := NewReader(bytes.NewReader(s.data), int64(len(s.data)), &ReaderOptions{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	ft := r.Footer()
	if ft == nil || len(ft.Blocks) < 5 || len(ft.Blocks) > 10 {
		t.Fatalf("%s: sweep segment has footer %+v, want 5 to 10 blocks", codec, ft)
	}
	s.footer = int64(len(s.data)) - footerSize(len(ft.Blocks))
	s.start = r.Start()
	for i, b := range ft.Blocks {
		end := s.footer
		if i+1 < len(ft.Blocks) {
			end = ft.Blocks[i+1].Offset
		}
		s.blocks = append(s.blocks, blockSpan{off: b.Offset, end: end, first: b.FirstSeq, count: int(b.Count)})
	}
	return s
}

// damage describes damage done to a sweep segment: cut at a length (the
// segment's length for none) and bits flipped.
type damage struct {
	cut   int64
	flips []int64 // bit numbers
}

func (d *damage) String() string {
	if len(d.flips) == 0 {
		return fmt.Sprintf("truncated to %d bytes", d.cut)
	}
	return fmt.Sprintf("bits %v flipped (bytes %v)", d.flips, d.bytes())
}

func (d *damage) bytes() []int64 {
	var b []int64
	for _, f := range d.flips {
		b = append(b, f/8)
	}
	return b
}

// touches reports whether the damage touches bytes [lo, hi).
func (d *damage) touches(lo, hi int64) bool {
	if d.cut < hi {
		return true
	}
	for _, f := range d.flips {
		if f/8 >= lo && f/8 < hi {
			return true
		}
	}
	return false
}

func (d *damage) apply(data []byte) []byte {
	out := slices.Clone(data[:d.cut])
	for _, f := range d.flips {
		if f/8 < d.cut {
			out[f/8] ^= 1 << (f % 8)
		}
	}
	return out
}

// check reads the damaged segment with a Reader and Scan, and fails the test
// unless every intact block yields all its records, no damaged block yields
// any, every record is the one written at its sequence number and every
// error is typed.
func (s *sweepSegment) check(t testing.TB, d *damage) {
	t.Helper()
	data := d.apply(s.data)
	size := int64(len(data))
	opts := &ReaderOptions{Name: s.name, Keys: s.keys}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, %s: %s", s.name, d, fmt.Sprintf(format, args...))
	}

	r, err := NewReader(bytes.NewReader(data), size, opts)
	if d.touches(0, s.start) {
		if err == nil {
			fail("NewReader accepted a damaged header")
		}
		checkCorruptError(t, err, s.name)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormat) {
			fail("header damage reported as %v", err)
		}
		if _, err := Scan(bytes.NewReader(data), size, opts); err == nil {
			fail("Scan accepted a damaged header")
		}
		return
	}
	if err != nil {
		fail("NewReader: %v", err)
	}
	footerHit := d.touches(s.footer, int64(len(s.data)))
	if r.Sealed() == footerHit {
		fail("Sealed() = %v, footer damaged: %v (%v)", r.Sealed(), footerHit, r.FooterError())
	}
	if footerHit {
		ce := checkCorruptError(t, r.FooterError(), s.name)
		if ce.Offset < s.start || ce.Offset > size {
			fail("footer error at offset %d: %v", ce.Offset, ce)
		}
	} else if r.FooterError() != nil || r.Footer().Records != uint64(len(s.recs)) {
		fail("sealed, but footer error %v, footer %+v", r.FooterError(), r.Footer())
	}

	// Which records must come back: those of the blocks the damage misses.
	want := make([]bool, len(s.recs))
	firstHit := len(s.blocks)
	anyHit := false // a damaged block is (partly) there, so an error is due
	for i, b := range s.blocks {
		if d.touches(b.off, b.end) {
			anyHit = anyHit || b.off < d.cut
			firstHit = min(firstHit, i)
			continue
		}
		for j := range b.count {
			want[b.first+uint64(j)] = true
		}
	}

	got := make([]bool, len(s.recs))
	var errs int
	next := uint64(0)
	for calls := 0; ; calls++ {
		if calls > len(s.recs)+2*len(s.blocks)+4 {
			fail("Next does not end")
		}
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs++
			ce := checkCorruptError(t, err, s.name)
			if ce.Offset < s.start || ce.Offset >= size {
				fail("error at offset %d outside the blocks: %v", ce.Offset, err)
			}
			continue
		}
		if rec.Seq < next || rec.Seq >= uint64(len(s.recs)) {
			fail("record seq %d, expected at least %d", rec.Seq, next)
		}
		if !want[rec.Seq] {
			fail("record %d comes from a damaged block", rec.Seq)
		}
		checkRecord(t, rec, rec.Seq, &s.recs[rec.Seq])
		got[rec.Seq] = true
		next = rec.Seq + 1
	}
	if !slices.Equal(got, want) {
		fail("records read %v, want %v", seqs(got), seqs(want))
	}
	if anyHit && errs == 0 {
		fail("damaged blocks reported no error")
	}
	if !anyHit && !footerHit && errs != 0 {
		fail("%d errors reading an intact segment", errs)
	}
	if _, err := r.Next(); err != io.EOF {
		fail("Next after EOF: %v", err)
	}

	// A Stream delivers what ReadBlock reads.
	checkStream(t, data, opts)

	// Scan finds the intact prefix.
	res, err := Scan(bytes.NewReader(data), size, opts)
	if err != nil {
		fail("Scan: %v", err)
	}
	if len(res.Blocks) != firstHit || res.Sealed != !footerHit || res.Size != size {
		fail("Scan found %d blocks (sealed %v), want %d (sealed %v)", len(res.Blocks), res.Sealed, firstHit, !footerHit)
	}
	end, records := s.start, uint64(0)
	if firstHit > 0 {
		end = s.blocks[firstHit-1].end
		records = s.blocks[firstHit-1].first + uint64(s.blocks[firstHit-1].count)
	}
	if res.End != end || res.Records != records {
		fail("Scan: prefix ends at %d with %d records, want %d with %d", res.End, res.Records, end, records)
	}
	// No damage is reported only when the prefix reaches the footer or the
	// end of the data.
	if clean := size == end || (!footerHit && firstHit == len(s.blocks)); clean != (res.Damage == nil) {
		fail("Scan damage %v", res.Damage)
	}
	if res.Damage != nil {
		checkCorruptError(t, res.Damage, s.name)
	}

	// Sealing the prefix makes a sealed segment of its records. The prefix
	// is intact, so this is checked once for each.
	if !s.sealChecked[res.End] {
		var sealed bytes.Buffer
		sealed.Write(data[:res.End])
		if err := Seal(&sealed, res); err != nil {
			fail("Seal: %v", err)
		}
		readAllRecordsOpts(t, sealed.Bytes(), s.recs[:res.Records], &ReaderOptions{Name: "test", Keys: s.keys})
		s.sealChecked[res.End] = true
	}
}

func seqs(b []bool) []int {
	var s []int
	for i, ok := range b {
		if ok {
			s = append(s, i)
		}
	}
	return s
}

// TestTruncationSweep reads a multi-block segment truncated at every length
// (DLQDUMP_FULL=1, cmd/dlqdump-reliability's "full tests"), or at CI's sample
// of them (sweepSegment.cuts: every length where the structure is parsed,
// every 7th elsewhere).
func TestTruncationSweep(t *testing.T) {
	t.Parallel()
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			t.Parallel()
			s := newSweepSegment(t, codec)
			for _, cut := range s.cuts() {
				s.check(t, &damage{cut: cut})
			}
			s.check(t, &damage{cut: int64(len(s.data))})
		})
	}
}

// bitFlips returns n deterministic sets of flipped bits in a segment of size
// bytes: single flips anywhere, single flips in the block headers, footer
// and trailer (where the structure is parsed), and sets of 2 to 8 flips,
// spread or in a burst.
func bitFlips(s *sweepSegment, n int, seed uint64) []damage {
	r := newPRNG(seed)
	size := int64(len(s.data))
	bits := size * 8
	var out []damage
	for i := range n {
		d := damage{cut: size}
		switch i % 5 {
		case 0, 1: // one bit anywhere
			d.flips = []int64{int64(r.next() % uint64(bits))}
		case 2: // one bit in a block header or the footer and trailer
			var lo, hi int64
			if k := r.intn(len(s.blocks) + 1); k < len(s.blocks) {
				lo, hi = s.blocks[k].off, s.blocks[k].off+BlockHeaderSize
			} else {
				lo, hi = s.footer, size
			}
			d.flips = []int64{lo*8 + int64(r.next()%uint64((hi-lo)*8))}
		case 3: // 2 to 8 bits anywhere
			for range 2 + r.intn(7) {
				d.flips = append(d.flips, int64(r.next()%uint64(bits)))
			}
		case 4: // a burst of up to 8 bits within 4 bytes
			at := int64(r.next() % uint64(bits-32))
			for range 1 + r.intn(8) {
				d.flips = append(d.flips, at+int64(r.intn(32)))
			}
		}
		// A bit flipped twice is not flipped.
		slices.Sort(d.flips)
		d.flips = slices.Compact(d.flips)
		out = append(out, d)
	}
	return out
}

// TestBitFlipSweep reads a multi-block segment with 2,000 sets of flipped
// bits a codec (DLQDUMP_FULL=1, cmd/dlqdump-reliability's "full tests"), or
// the first 500 of them in CI.
func TestBitFlipSweep(t *testing.T) {
	t.Parallel()
	for i, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			t.Parallel()
			s := newSweepSegment(t, codec)
			for _, d := range bitFlips(s, flipSets(2000), uint64(i)+1) {
				s.check(t, &d)
			}
		})
	}
}

// TestCorruptReadMemory checks that reading a damaged small segment never
// allocates more than a small bound, whatever lengths the damage makes up:
// the reader must check every length before it allocates.
func TestCorruptReadMemory(t *testing.T) {
	const bound = 2 << 20
	var worst uint64
	var worstWhat string
	measure := func(s *sweepSegment, d *damage) {
		data := d.apply(s.data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		readDamaged(data)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > worst {
			worst, worstWhat = n, fmt.Sprintf("%s, %s", s.name, d)
		}
	}
	for i, codec := range allCodecs {
		s := newSweepSegment(t, codec)
		readDamaged(s.data) // warm up the decoder pools
		for cut := int64(0); cut < int64(len(s.data)); cut += 7 {
			measure(s, &damage{cut: cut})
		}
		for _, d := range bitFlips(s, 300, uint64(i)+100) {
			measure(s, &d)
		}
	}
	t.Logf("worst read allocated %d bytes: %s", worst, worstWhat)
	if worst > bound {
		t.Fatalf("reading a damaged segment of a few KB allocated %d bytes (%s)", worst, worstWhat)
	}
}

// readDamaged reads all it can of data with a Reader and Scan.
func readDamaged(data []byte) int {
	n := 0
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		return 0
	}
	for range 1000 {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		n++
	}
	if _, err := Scan(bytes.NewReader(data), int64(len(data)), nil); err != nil {
		return -1
	}
	return n
}
