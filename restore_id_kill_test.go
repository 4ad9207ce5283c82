package dlqdump_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// TestCrashRedeliverySameID: a restorer killed in the middle of a block
// delivers that block's records again after the restart, each with the ID
// (Envelope.Headers[HeaderRecordID]) it had the first time; IDs are unique;
// and docs/RESTORE.md's Dedup destination, fed everything delivered across the
// crashes, passes each record on exactly once.
func TestCrashRedeliverySameID(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 8 * dlqdump.Kilobyte, Writer: &fs.Writer{Directory: dir}})
	items := itemsN("d", 20000)
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	_, maxBlock := blockSizes(t, dir)
	var lines []string
	for _, k := range []int{3001, 7777} {
		lines = append(lines, runKiller(t, dir, k, "", "DLQDUMP_ENVELOPE=1")...)
	}
	lines = append(lines, runKiller(t, dir, 0, "", "DLQDUMP_ENVELOPE=1")...)

	idOf := map[string]string{}   // payload -> ID
	itemOf := map[string]string{} // ID -> payload
	times := map[string]int{}
	var delivered []*dlqdump.Envelope
	for _, l := range lines {
		id, item, ok := strings.Cut(l, "|")
		if !ok {
			t.Fatalf("line %q", l)
		}
		if _, err := dlqdump.ParseRecordID(id); err != nil {
			t.Fatalf("delivered with ID %q: %v", id, err)
		}
		if old, seen := idOf[item]; seen && old != id {
			t.Fatalf("%s delivered with ID %s, again with %s", item, old, id)
		}
		if old, seen := itemOf[id]; seen && old != item {
			t.Fatalf("ID %s delivered for %s and for %s", id, old, item)
		}
		idOf[item], itemOf[id] = id, item
		times[item]++
		delivered = append(delivered, &dlqdump.Envelope{Item: item, Headers: dlqdump.Headers{dlqdump.HeaderRecordID: id}})
	}
	dups := 0
	for _, it := range items {
		if times[it] == 0 {
			t.Fatalf("%s never delivered", it)
		}
		dups += times[it] - 1
	}
	t.Logf("2 kills: %d records delivered again (bound %d), each with its first ID", dups, 2*maxBlock)
	if dups == 0 || dups > 2*maxBlock {
		t.Fatalf("%d records delivered twice: want some (a kill in the middle of a block), at most one block per kill (%d)", dups, 2*maxBlock)
	}

	// The README's destination drops them.
	passed := map[string]int{}
	d := &Dedup{Window: 4096, Next: func(x any) error {
		passed[x.(*dlqdump.Envelope).Item.(string)]++
		return nil
	}}
	for _, env := range delivered {
		if err := d.Enqueue(env); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range items {
		if passed[it] != 1 {
			t.Fatalf("Dedup passed %s on %d times, want once", it, passed[it])
		}
	}
}

// README:begin dedup

// Dedup is a destination that drops the records it has seen, by the ID
// every record a Restorer delivers carries (Config.DeliverEnvelope, or a
// HeaderCarrier). A crash re-delivers at most one block per segment in
// flight, right after the restart: remembering the last Window IDs (more
// than a block's records times Config.Concurrency segments) drops them
// all. A destination that must survive its own restarts keeps the IDs
// where it keeps its effects (a unique key, written in the same
// transaction).
type Dedup struct {
	Window int               // IDs remembered
	Next   func(x any) error // the real destination

	mu   sync.Mutex
	seen map[string]bool
	ring []string
	at   int
}

// Enqueue passes x on unless its ID was seen lately.
func (d *Dedup) Enqueue(x any) error {
	id := x.(*dlqdump.Envelope).Headers[dlqdump.HeaderRecordID]
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[id] {
		return nil // delivered before the crash: accepted, not done twice
	}
	if err := d.Next(x); err != nil {
		return err // refused: not remembered, so a retry passes it on
	}
	if d.seen == nil {
		d.seen, d.ring = map[string]bool{}, make([]string, d.Window)
	}
	delete(d.seen, d.ring[d.at])
	d.ring[d.at], d.seen[id] = id, true
	d.at = (d.at + 1) % d.Window
	return nil
}

// README:end dedup
