package segment

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"testing"
	"time"
)

// TestRoundTripMillion writes a million small records with headers through
// Writer.Add and reads them back with Reader.Next: every payload byte, header,
// time and sequence number must come back, in order. The expected records are
// recomputed from their sequence numbers, so nothing is kept in memory. CI
// writes 250,000 (still past 2^16 records and hundreds of blocks), the full
// million with DLQDUMP_FULL=1 (cmd/dlqdump-reliability's "full tests").
func TestRoundTripMillion(t *testing.T) {
	t.Parallel()
	n := uint64(250_000)
	if fullRun() {
		n = 1_000_000
	}
	if testing.Short() {
		n = 100_000
	}
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			t.Parallel()
			f := tempFile(t, "million"+Ext)
			w, err := NewWriter(f, testHeader(codec), nil)
			if err != nil {
				t.Fatal(err)
			}
			var payload []byte
			minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
			for seq := range n {
				payload = smallPayload(payload[:0], seq)
				h, _ := smallHeaders(seq)
				tm := smallTime(seq)
				minT, maxT = min(minT, tm.UnixNano()), max(maxT, tm.UnixNano())
				if err := w.Add(tm, h, payload); err != nil {
					t.Fatalf("Add %d: %v", seq, err)
				}
			}
			if got := w.Records() + uint64(w.bb.Count()); got != n {
				t.Fatalf("writer holds %d records, want %d", got, n)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Add(time.Now(), nil, nil); err != ErrClosed {
				t.Fatalf("Add after Close: %v, want ErrClosed", err)
			}
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != w.Size() {
				t.Fatalf("file has %d bytes, Writer.Size() says %d", st.Size(), w.Size())
			}

			r, err := NewReader(f, st.Size(), &ReaderOptions{Name: "million"})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Sealed() || r.FooterError() != nil {
				t.Fatalf("not sealed: %v", r.FooterError())
			}
			checkHeader(t, r.Header(), testHeader(codec))
			ft := r.Footer()
			if ft.Records != n || ft.MinTime.UnixNano() != minT || ft.MaxTime.UnixNano() != maxT {
				t.Fatalf("footer: %d records in [%v, %v], want %d in [%v, %v]", ft.Records, ft.MinTime, ft.MaxTime, n, time.Unix(0, minT), time.Unix(0, maxT))
			}
			var rawSum uint64
			for _, b := range ft.Blocks {
				rawSum += uint64(b.RawLen)
				if b.RawLen > DefaultBlockSize {
					t.Fatalf("block at %d has %d raw bytes, more than the block size", b.Offset, b.RawLen)
				}
			}
			if rawSum != ft.RawBytes {
				t.Fatalf("footer: raw bytes %d, its index sums to %d", ft.RawBytes, rawSum)
			}
			if codec != CodecNone && ft.StoredBytes >= ft.RawBytes/2 {
				t.Fatalf("%s stored %d of %d raw bytes: JSON should compress better", codec, ft.StoredBytes, ft.RawBytes)
			}

			block := -1
			for seq := uint64(0); ; seq++ {
				got, err := r.Next()
				if err == io.EOF {
					if seq != n {
						t.Fatalf("EOF after %d records, want %d", seq, n)
					}
					break
				}
				if err != nil {
					t.Fatalf("record %d: %v", seq, err)
				}
				if got.Seq != seq {
					t.Fatalf("record seq %d, want %d", got.Seq, seq)
				}
				if want := smallTime(seq).UnixNano(); got.Time != want {
					t.Fatalf("record %d: time %d, want %d", seq, got.Time, want)
				}
				if !isSmallPayload(got.Payload, seq) {
					t.Fatalf("record %d: payload %q, want %q", seq, got.Payload, smallPayload(nil, seq))
				}
				h, enc := smallHeaders(seq)
				// enc is the header count (one byte) and the pairs.
				if got.Headers.Len() != len(h) || int(enc[0]) != len(h) || string(got.Headers.b) != string(enc[1:]) {
					t.Fatalf("record %d: headers %v, want %v", seq, got.Headers.Map(), h)
				}
				if seq%997 == 0 {
					checkHeadersView(t, got.Headers, h)
				}
				if b := r.Block(); b.FirstSeq == seq {
					block++
					if want := ft.Blocks[block]; b.Offset != want.Offset || b.Count != want.Count || b.RawLen != want.RawLen {
						t.Fatalf("block %d is %+v, the footer says %+v", block, b, want)
					}
				}
			}
			if block != len(ft.Blocks)-1 {
				t.Fatalf("read %d blocks, the footer lists %d", block+1, len(ft.Blocks))
			}
		})
	}
}

func checkHeader(t testing.TB, got, want Header) {
	t.Helper()
	want.FormatVersion = FormatVersion
	if got.FormatVersion != want.FormatVersion || got.Codec != want.Codec || got.DataVersion != want.DataVersion ||
		!got.Created.Equal(want.Created) || got.ID != want.ID {
		t.Fatalf("header %+v, want %+v", got, want)
	}
}

// checkHeadersView checks every accessor of h against want.
func checkHeadersView(t testing.TB, h Headers, want map[string]string) {
	t.Helper()
	if h.Len() != len(want) {
		t.Fatalf("Headers.Len() = %d, want %d", h.Len(), len(want))
	}
	for k, v := range want {
		if got, ok := h.Get(k); !ok || got != v {
			t.Fatalf("Headers.Get(%q) = %q, %v; want %q", k, got, ok, v)
		}
		if got, ok := h.Lookup(k); !ok || string(got) != v {
			t.Fatalf("Headers.Lookup(%q) = %q, %v; want %q", k, got, ok, v)
		}
	}
	if _, ok := h.Get("no-such-header"); ok {
		t.Fatal("Headers.Get found a header that is not there")
	}
	if _, ok := h.Lookup("no-such-header"); ok {
		t.Fatal("Headers.Lookup found a header that is not there")
	}
	m := h.Map()
	if len(want) == 0 {
		if m != nil {
			t.Fatalf("Headers.Map() = %v, want nil", m)
		}
	} else if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("Headers.Map() = %v, want %v", m, want)
	}
	prev, n := "", 0
	for k, v := range h.All() {
		if n > 0 && k <= prev {
			t.Fatalf("Headers.All: key %q after %q, want sorted unique keys", k, prev)
		}
		if want[k] != v {
			t.Fatalf("Headers.All: %q=%q, want %q", k, v, want[k])
		}
		prev = k
		n++
	}
	if n != len(want) {
		t.Fatalf("Headers.All yielded %d headers, want %d", n, len(want))
	}
}

// roundTripSizes returns the payload sizes of TestRoundTripSizes: every size
// from 0 to 300, the sizes around powers of two and the block size, and
// sizes spread up to 1 MiB.
func roundTripSizes() []int {
	var sizes []int
	for s := 0; s <= 300; s++ {
		sizes = append(sizes, s)
	}
	for p := 9; p < 20; p++ {
		sizes = append(sizes, 1<<p-1, 1<<p, 1<<p+1)
	}
	for d := -8; d <= 2; d++ {
		sizes = append(sizes, DefaultBlockSize+d)
	}
	sizes = append(sizes, 2*DefaultBlockSize-1, 2*DefaultBlockSize+1, 1<<20-1, 1<<20)
	r := newPRNG(99)
	for range 50 {
		// Log-uniform between 256 B and 1 MiB.
		sizes = append(sizes, int(math.Exp2(8+12*float64(r.next()>>11)/(1<<53))))
	}
	// Shuffle so small records follow big ones and blocks mix sizes.
	for i := len(sizes) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		sizes[i], sizes[j] = sizes[j], sizes[i]
	}
	return sizes
}

// sizedRecords returns one record per size: alternately JSON (compressible),
// random (incompressible) and zeros, with assorted headers and times.
func sizedRecords(sizes []int) []rec {
	recs := make([]rec, len(sizes))
	r := newPRNG(7)
	for i, size := range sizes {
		var p []byte
		switch i % 3 {
		case 0:
			p = appendJSONRecord(make([]byte, 0, size), uint64(i), size)
		case 1:
			p = make([]byte, size)
			r.fill(p)
		case 2:
			p = make([]byte, size)
		}
		h, _ := smallHeaders(uint64(i))
		recs[i] = rec{t: genBaseTime.UnixNano() + int64(r.intn(1<<40)) - 1<<39, headers: h, payload: p}
	}
	return recs
}

// TestRoundTripSizes round-trips records of every size from 0 B to 1 MiB,
// including the exact block size boundaries, with the default block size
// and a small one.
func TestRoundTripSizes(t *testing.T) {
	t.Parallel()
	recs := sizedRecords(roundTripSizes())
	if len(recs) < 350 {
		t.Fatalf("only %d sizes", len(recs))
	}
	// Records whose raw size is exactly a block size, one byte less and one
	// more. Each is the first of its block (the one before cannot share it),
	// so its time delta takes one byte; with no headers the body is one byte
	// of header count and the payload, and the body length takes 2 bytes
	// below 16 KiB and 3 above.
	for _, bs := range []int{4096, DefaultBlockSize} {
		lenLen := 3
		if bs < 16<<10 {
			lenLen = 2
		}
		for d := -3; d <= 3; d++ {
			payload := bs + d - lenLen - 1 - 1
			recs = append(recs, rec{t: genBaseTime.UnixNano() + int64(d), payload: bytes.Repeat([]byte{byte('a' + d + 3)}, payload)})
		}
	}
	for _, codec := range allCodecs {
		for _, bs := range []int{DefaultBlockSize, 4096} {
			t.Run(fmt.Sprintf("%s/block=%d", codec, bs), func(t *testing.T) {
				t.Parallel()
				data := writeRecords(t, codec, &WriterOptions{BlockSize: bs}, recs)
				r := readAllRecords(t, data, recs)
				single := map[int]bool{}
				for i, b := range r.Footer().Blocks {
					if b.Count > 1 && int(b.RawLen) > bs {
						t.Fatalf("block %d holds %d records in %d raw bytes, more than the block size %d", i, b.Count, b.RawLen, bs)
					}
					if b.Count == 1 {
						single[int(b.RawLen)] = true
					}
				}
				for d := -1; d <= 1; d++ {
					if !single[bs+d] {
						t.Errorf("no block of one record of exactly %d raw bytes", bs+d)
					}
				}
				// Every block is as large as the block size allows: the
				// next block's first record would not have fit.
				if err := r.Seek(Position{}); err != nil {
					t.Fatal(err)
				}
				var prev BlockInfo
				for i := 0; ; i++ {
					b, err := r.NextBlock()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if i > 0 {
						first := &recs[b.FirstSeq]
						body := len(AppendHeaders(nil, first.headers)) + len(first.payload)
						if int(prev.RawLen)+RecordSize(body) <= bs && int(prev.RawLen) < bs {
							t.Fatalf("block %d (%d raw bytes) was cut although record %d (body %d) fit", i-1, prev.RawLen, b.FirstSeq, body)
						}
					}
					prev = b
				}
			})
		}
	}
}

// TestExtremeTimes round-trips records whose times are far apart, so the
// delta to the block's base time overflows int64 and must wrap back.
func TestExtremeTimes(t *testing.T) {
	t.Parallel()
	times := []int64{0, math.MaxInt64, math.MinInt64, -1, 1, math.MinInt64 + 1, math.MaxInt64 - 1, genBaseTime.UnixNano(), -genBaseTime.UnixNano()}
	var recs []rec
	for i, tm := range times {
		recs = append(recs, rec{t: tm, headers: map[string]string{"i": fmt.Sprint(i)}, payload: []byte(fmt.Sprintf("record at %d", tm))})
	}
	for _, codec := range allCodecs {
		data := writeRecords(t, codec, nil, recs)
		r := readAllRecords(t, data, recs)
		ft := r.Footer()
		if len(ft.Blocks) != 1 || ft.Blocks[0].MinTime != math.MinInt64 || ft.Blocks[0].MaxTime != math.MaxInt64 {
			t.Fatalf("%s: footer blocks %+v, want one spanning all times", codec, ft.Blocks)
		}
		if ft.MinTime.UnixNano() != math.MinInt64 || ft.MaxTime.UnixNano() != math.MaxInt64 {
			t.Fatalf("%s: footer times [%d, %d]", codec, ft.MinTime.UnixNano(), ft.MaxTime.UnixNano())
		}
	}
}
