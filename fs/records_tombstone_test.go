package fs

import (
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// A removal stopped between its tombstone and its unlinks (a crash; with
// several segments in flight, any goroutine's removal can be cut there)
// left a record that RecordNames listed and ReadRecord called not found, so
// that nothing ever removed it. A read or a removal of it finishes the
// removal.
func TestTombstoneLeftByACrashIsFinished(t *testing.T) {
	ctx := t.Context()
	for _, finish := range []string{"read", "delete"} {
		t.Run(finish, func(t *testing.T) {
			r := &Reader{Directory: t.TempDir()}
			if _, err := r.WriteRecord(ctx, "a.dlq", []byte(`{"v":1}`), ""); err != nil {
				t.Fatal(err)
			}
			// The removal's tombstone, written as the removal writes
			// it, and no unlink after it.
			dir, base, err := r.recordBase(claimsSpace, "a.dlq")
			if err != nil {
				t.Fatal(err)
			}
			g, err := openGen(dir, base, base, true, false)
			if err != nil {
				t.Fatal(err)
			}
			cur, ok, err := g.slots(current, true)
			if err != nil || !ok {
				t.Fatalf("the record's slot: %v %v", ok, err)
			}
			if err := writeSlot(g.f, current, 1-cur.index, cur.seq+1, nil); err != nil {
				t.Fatal(err)
			}
			g.close()
			if names := recordNames(t, r); len(names) != 1 {
				t.Fatalf("listed %q before, want the tombstoned record", names)
			}
			switch finish {
			case "read":
				if _, _, err := r.ReadRecord(ctx, "a.dlq"); !errors.Is(err, sink.ErrNotFound) {
					t.Fatalf("ReadRecord of a tombstone = %v, want ErrNotFound", err)
				}
			case "delete":
				if err := r.DeleteRecord(ctx, "a.dlq", "x"); !errors.Is(err, sink.ErrNotFound) {
					t.Fatalf("DeleteRecord of a tombstone = %v, want ErrNotFound", err)
				}
			}
			if names := recordNames(t, r); len(names) != 0 {
				t.Fatalf("still listed after a %s: %q", finish, names)
			}
			if _, err := r.WriteRecord(ctx, "a.dlq", []byte(`{"v":2}`), ""); err != nil {
				t.Fatalf("a new record of the name: %v", err)
			}
		})
	}
}

func recordNames(t *testing.T, r *Reader) []string {
	t.Helper()
	var names []string
	for n, err := range r.RecordNames(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}
