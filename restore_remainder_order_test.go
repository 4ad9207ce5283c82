package dlqdump_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/selection"
)

// recording is a destination that keeps what it was offered, in order.
type recording struct {
	mu  sync.Mutex
	got []string
}

func (d *recording) Enqueue(x any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, x.(string))
	return nil
}

// The records a selective pass left in several segments (their remainders)
// are read a block at a time, each as large as the Restorer allows, so a
// remainder is delivered alone, holding the delivery token from its first
// block to its last (restore_memory.go): each segment's remainder in its
// order, one segment after the other, never two side by side. (Before the
// segments in flight delivered at once, remainders were delivered at once
// too, and the restore fault enumeration's replay-and-discard variant saw
// 78 and 81 records twice at Reader.WriteRecord#65, over the bound then.)
func TestRemainderDeliversInOrder(t *testing.T) {
	s := newActStore(t, 2, 40) // records "s0-000-…" to "s1-039-…", 12 to a block
	d := &recording{}
	r := newRestorer(t, dlqdump.Config{Reader: s.st, Queue: d, SegmentsInFlight: 8})
	// A selective pass leaves most of each segment's records.
	five, err := selection.Parse(`payload ~ "5-"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), dlqdump.RunOptions{Select: five}); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	first := len(d.got)
	d.got = nil
	d.mu.Unlock()
	if first != 8 {
		t.Fatalf("the first pass delivered %d records, want 8", first)
	}
	if _, err := r.Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	got := d.got
	if len(got) != 72 {
		t.Fatalf("the second pass delivered %d records, want the 72 left", len(got))
	}
	switches := 0
	for i := 1; i < len(got); i++ {
		if got[i][:2] != got[i-1][:2] {
			switches++
		}
	}
	if switches > 1 {
		t.Fatalf("the second pass switched segments %d times: the segments' remainders were delivered side by side: %v", switches, got)
	}
	for _, seg := range []string{"s0", "s1"} {
		var of []string
		for _, it := range got {
			if strings.HasPrefix(it, seg) {
				of = append(of, it)
			}
		}
		if !slices.IsSorted(of) {
			t.Fatalf("segment %s's remainder was delivered out of order: %v", seg, of)
		}
	}
}
