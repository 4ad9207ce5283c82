package decoder_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/segment"
)

// TestFallthroughItemsOutliveBlocks restores a segment the way the Restorer
// does, through a segment.Stream, keeping every Fallthrough item after its
// block is released and later blocks are decoded: the items keep their
// bytes, appending to one leaves its neighbour alone, and each block's
// memory is shared by its items, not copied per item.
func TestFallthroughItemsOutliveBlocks(t *testing.T) {
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecZstd}, &segment.WriterOptions{BlockSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, 2000)
	for i := range want {
		want[i] = fmt.Appendf(nil, `{"id":%d,"note":"dead letter number %d"}`, i, i*7919)
		if err := w.Add(time.Unix(0, int64(i)), nil, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := segment.NewStream(r, &segment.StreamOptions{Workers: 2, ReadAhead: 8192})
	defer s.Close()
	var items []any
	blocks := 0
	for {
		b, err := s.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for rec := range b.Records() {
			x, err := decoder.Fallthrough{}.Decode(rec.Payload)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, x)
		}
		if blocks == 0 {
			// One allocation a record, the interface value's; Copy adds
			// one for the copy.
			var sink any
			for name, dec := range map[string]decoder.Fallthrough{"shared": {}, "Copy": {Copy: true}} {
				allocs := testing.AllocsPerRun(10, func() {
					for rec := range b.Records() {
						sink, _ = dec.Decode(rec.Payload)
					}
				})
				want := float64(b.Len())
				if dec.Copy {
					want *= 2
				}
				if allocs != want {
					t.Errorf("%s: %v allocations decoding a block of %d records, want %v", name, allocs, b.Len(), want)
				}
			}
			_ = sink
		}
		b.Release()
		blocks++
		runtime.GC()
	}
	if blocks < 10 {
		t.Fatalf("%d blocks", blocks)
	}
	for i, x := range items {
		p := x.([]byte)
		_ = append(p, "overwrite"...) // capped: copies
		if !bytes.Equal(p, want[i]) {
			t.Fatalf("item %d = %q, want %q", i, p, want[i])
		}
	}
	for i, x := range items {
		if !bytes.Equal(x.([]byte), want[i]) {
			t.Fatalf("after appends, item %d = %q, want %q", i, x, want[i])
		}
	}
}
