package gen

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestEventsAreValidSizedAndVaried(t *testing.T) {
	for _, size := range []int{64, 256, 1024, 16 << 10} {
		g := New(1)
		evs := g.Events(200, size)
		seen := map[string]bool{}
		var total int
		for _, e := range evs {
			if !json.Valid(e) {
				t.Fatalf("size %d: invalid JSON %s", size, e)
			}
			seen[string(e)] = true
			total += len(e)
		}
		if len(seen) != len(evs) {
			t.Fatalf("size %d: %d distinct events of %d", size, len(seen), len(evs))
		}
		if avg := total / len(evs); avg < size*3/4 || avg > size*5/4+40 {
			t.Fatalf("size %d: average %d bytes", size, avg)
		}
	}
	if !bytes.Equal(New(7).Event(256), New(7).Event(256)) {
		t.Fatal("not deterministic")
	}
}
