package segment

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
)

// hostileSegment returns the segment of issue 12, defect 8: three blocks of
// the largest raw size a reader accepts by default, each full of the smallest
// records (3 bytes: no time delta, no headers, no payload), zstd-compressed
// into about 7 KB each, so a segment of about 22 KB holding 67 million
// records. rawLen is the raw size of each block.
func hostileSegment(t testing.TB, rawLen int) []byte {
	t.Helper()
	rawLen -= rawLen % 3
	raw := bytes.Repeat([]byte{2, 0, 0}, rawLen/3)
	stored := compress(t, CodecZstd, raw)
	var blocks []*craftedBlock
	for i := range 3 {
		blocks = append(blocks, &craftedBlock{codec: CodecZstd, count: uint32(rawLen / 3), rawLen: uint32(rawLen),
			firstSeq: uint64(i * rawLen / 3), storedLen: -1, stored: stored})
	}
	return craftSegment(CodecZstd, blocks...)
}

// liveHeap returns the bytes of live heap objects, after a collection.
func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestHostileSegmentMemory reads the 22 KB segment of issue 12, defect 8,
// which drove the Restorer's heap to 1.3 GiB (8 bytes of offsets a record,
// times three blocks read ahead), in every way a segment is read, and
// checks that memory is bounded by a block's raw size, whatever the number
// of records: the live heap at every block is at most one block, its index
// (4 bytes every 16 records) and the read-ahead; and all that is allocated
// is about one buffer a block. With MaxExpansion set, the blocks are refused
// before anything is allocated for them.
func TestHostileSegmentMemory(t *testing.T) {
	rawLen := MaxBlockSize
	if raceEnabled || testing.Short() {
		rawLen = 8 << 20 // the bound scales with it; the race detector is slow
	}
	data := hostileSegment(t, rawLen)
	records := 3 * (rawLen / 3)
	t.Logf("segment of %d bytes, 3 blocks of %d raw bytes, %d records", len(data), rawLen-rawLen%3, records)
	if rawLen == MaxBlockSize && len(data) > 32<<10 {
		t.Fatalf("hostile segment of %d bytes", len(data))
	}
	block := uint64(rawLen + decodeSlack)
	index := uint64(4 * (rawLen/3 + indexStride - 1) / indexStride)
	open := func(opts *ReaderOptions) *Reader {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), opts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var worstLive uint64
	check := func(how string, base uint64, bound uint64, read func(sample func())) {
		t.Helper()
		var before, after runtime.MemStats
		var live uint64
		runtime.GC()
		runtime.ReadMemStats(&before)
		read(func() {
			if h := liveHeap(); h > base {
				live = max(live, h-base)
			}
		})
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: live heap at most %.1f MiB beyond the start, %.1f MiB allocated in all", how, float64(live)/(1<<20), float64(alloc)/(1<<20))
		if live > bound {
			t.Errorf("%s: live heap %d bytes beyond the start, the bound is %d", how, live, bound)
		}
		worstLive = max(worstLive, live)
		if limit := 3*(block+index) + 2<<20; alloc > limit {
			t.Errorf("%s: allocated %d bytes reading 3 blocks of %d, the bound is %d", how, alloc, block, limit)
		}
	}
	const slack = 2 << 20

	// Reader.Next: one buffer, reused.
	check("Reader.Next", liveHeap(), block+slack, func(sample func()) {
		r := open(nil)
		n := 0
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec.Seq%uint64(rawLen/3) == 1 {
				sample()
			}
			n++
		}
		if n != records {
			t.Fatalf("Next: %d records, want %d", n, records)
		}
	})
	// ReadBlock: new memory per block; the old block is garbage.
	check("Reader.ReadBlock", liveHeap(), block+index+slack, func(sample func()) {
		r := open(nil)
		var b Block
		n := 0
		for {
			err := r.ReadBlock(&b)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sample()
			n += b.Len()
		}
		if n != records {
			t.Fatalf("ReadBlock: %d records, want %d", n, records)
		}
	})
	// Stream: two workers, the default read-ahead; each block is held
	// while its records are gone through, then released.
	check("Stream", liveHeap(), block+index+DefaultReadAhead+slack, func(sample func()) {
		s := NewStream(open(nil), &StreamOptions{Workers: 2})
		defer s.Close()
		n := 0
		for {
			b, err := s.Next(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sample()
			for rec := range b.Records() {
				if len(rec.Payload) != 0 {
					t.Fatal("payload")
				}
				n++
			}
			sample()
			b.Release()
		}
		if n != records {
			t.Fatalf("Stream: %d records, want %d", n, records)
		}
	})
	t.Logf("worst live heap %.1f MiB for a %d-byte segment (the Restorer's was about 1.3 GiB before)", float64(worstLive)/(1<<20), len(data))

	// With MaxExpansion, each block is refused before its raw bytes are
	// allocated: what is allocated is the size of the file.
	n := allocated(func() {
		r := open(&ReaderOptions{Name: "hostile", MaxExpansion: 1000})
		errs := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("MaxExpansion: %v, want ErrTooLarge", err)
			}
			checkCorruptError(t, err, "hostile")
			errs++
		}
		if errs != 3 {
			t.Fatalf("MaxExpansion: %d errors, want 3", errs)
		}
	})
	t.Logf("with MaxExpansion: %d bytes allocated", n)
	if n > 1<<20 {
		t.Errorf("with MaxExpansion, reading the %d-byte segment allocated %d bytes", len(data), n)
	}
}
