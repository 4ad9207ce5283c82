package dlqdump_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/selection"
)

// holdFirst is a destination that holds the first record of segment "s0"
// until a record of segment "s1" is offered, or a second passed: segments
// that deliver at once show as s1's records before s0's.
type holdFirst struct {
	mu    sync.Mutex
	got   []string
	held  bool
	other chan struct{}
	once  sync.Once
}

func (d *holdFirst) Enqueue(x any) error {
	s := x.(string)
	d.mu.Lock()
	first := !d.held && strings.HasPrefix(s, "s0")
	d.held = d.held || first
	d.mu.Unlock()
	if strings.HasPrefix(s, "s1") {
		d.once.Do(func() { close(d.other) })
	}
	if first {
		select {
		case <-d.other:
		case <-time.After(time.Second):
		}
	}
	d.mu.Lock()
	d.got = append(d.got, s)
	d.mu.Unlock()
	return nil
}

// The records a selective pass left in several segments are delivered one
// segment after the other, as a segment's first pass is: with segments in
// flight delivering at once, a crash delivered a block of each twice (the
// restore fault enumeration's replay-and-discard variant: 78 and 81
// records twice, bound 60, at Reader.WriteRecord#65); this test saw s1's
// records before s0's.
func TestRemainderDeliversInOrder(t *testing.T) {
	s := newActStore(t, 2, 40) // records "s0-000-…" to "s1-039-…", 12 to a block
	d := &holdFirst{other: make(chan struct{})}
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
	d.got, d.held = nil, false
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
	for i := 1; i < len(got); i++ {
		if strings.HasPrefix(got[i-1], "s1") && strings.HasPrefix(got[i], "s0") {
			t.Fatalf("record %d of the second pass is %.6s after %.6s: the segments' remainders were delivered at once", i, got[i], got[i-1])
		}
	}
}
