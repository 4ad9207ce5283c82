package dlqdump_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// A side segment's blocks are no larger than its source's, which bound
// what an interruption delivers twice, even when the source's blocks are
// smaller than 512 bytes (BlockSize 512, the least a Queue takes, cuts
// blocks just under it). Before, such a source's side segment was written
// in blocks of segment.DefaultBlockSize (256 KiB): the 20 records carved
// from five source blocks became one block, all delivered twice after an
// interruption (found by the second review of carving).
func TestSideSegmentOfSmallBlocksKeepsThemSmall(t *testing.T) {
	st := memsink.New()
	q := newQueue(t, dlqdump.Config{Writer: st.Writer(), BlockSize: 512})
	for i := range 40 {
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%05d/%s", i%2, i, strings.Repeat("x", 100)), Headers: dlqdump.Headers{"batch": fmt.Sprint(i % 2)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	parent := st.Names(sink.AreaReady)
	if len(parent) != 1 {
		t.Fatalf("dumped %d segments, want one", len(parent))
	}
	largest := func(name string) (n, blocks int) {
		data := st.Get(sink.AreaReady, name)
		r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil)
		if err != nil {
			t.Fatalf("segment %s: %v", name, err)
		}
		for _, b := range r.Footer().Blocks {
			n = max(n, int(b.RawLen))
		}
		return n, len(r.Footer().Blocks)
	}
	src, srcBlocks := largest(parent[0])
	if src >= 512 || srcBlocks < 5 {
		t.Fatalf("the source's largest block is %d bytes of %d blocks: the test needs blocks under 512 bytes", src, srcBlocks)
	}
	// The pass carves batch 0 and delivers its side segment's first
	// record; the second waits, so the side segment is there to look at.
	gate := make(chan struct{})
	dst := newCarveDest(gate)
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: dst, Owner: "carver"})
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Rate: 1000, Carve: true})
		done <- err
	}()
	select {
	case <-dst.first:
	case err := <-done:
		t.Fatalf("the pass ended before delivering: %v", err)
	}
	var sides []string
	for _, name := range st.Names(sink.AreaReady) {
		if !slices.Contains(parent, name) {
			sides = append(sides, name)
		}
	}
	close(gate)
	if len(sides) != 1 {
		t.Fatalf("side segments %v, want one", sides)
	}
	side, sideBlocks := largest(sides[0])
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if side > 512 {
		t.Fatalf("the side segment's largest block is %d bytes, in %d blocks; its source's %d (at most 512 wanted)", side, sideBlocks, src)
	}
	onceEach(t, dst.items(), 20)
}
