package dlqdump_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// dumpPairs writes n segments of 10 records, those of segments 2k and
// 2k+1 of batch k, and returns their names and sizes.
func dumpPairs(t *testing.T, st *memsink.Store, n int) ([]string, map[string]int64) {
	t.Helper()
	for s := range n {
		q := newQueue(t, dlqdump.Config{Writer: st.Writer()})
		for i := range 10 {
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", s, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(s / 2)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	sizes := map[string]int64{}
	for info, err := range st.List(context.Background(), sink.AreaReady) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, info.Name)
		sizes[info.Name] = info.Size
	}
	return names, sizes
}

func batchSel(t *testing.T, k int) *selection.Selection {
	t.Helper()
	sel, err := selection.Parse(fmt.Sprintf("batch = %d", k), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// A restore job's dry run (what is left) and its pass read each segment the
// job selects from once between them: the dry run keeps the small
// segments it read (RunOptions.KeepForPass) and the pass reads them from
// there, after claiming and opening each as it would. Planning reads every
// segment once. Before, the pass read again what the dry run had read: the
// job's segments three times (planning, dry run, pass).
func TestDryRunKeepsWhatItsPassReads(t *testing.T) {
	st := memsink.New()
	names, sizes := dumpPairs(t, st, 6)
	bc := memsink.CountReads(st)
	var delivered atomic.Int64
	r := newRestorer(t, dlqdump.Config{Reader: bc, Queue: queueFunc(func(any) error { delivered.Add(1); return nil })})
	ctx := context.Background()
	sel := batchSel(t, 1) // segments 2 and 3
	dry, err := r.Run(ctx, dlqdump.RunOptions{Select: sel, DryRun: true, KeepForPass: true})
	if err != nil || dry.Delivered != 20 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	rep, err := r.Run(ctx, dlqdump.RunOptions{Select: sel})
	if err != nil || rep.Delivered != 20 || delivered.Load() != 20 {
		t.Fatalf("pass: %+v (%d delivered), %v", rep, delivered.Load(), err)
	}
	read := bc.Take()
	for i, name := range names {
		want := sizes[name] // planned
		if i == 2 || i == 3 {
			want *= 2 // and read by the dry run, not by the pass
		}
		if read[name] != want {
			t.Errorf("segment %d: %d bytes read, want %d (its size %d)", i, read[name], want, sizes[name])
		}
	}

	// What was kept is let go when the pass returns: a later dry run
	// reads from the store again.
	sel = batchSel(t, 2) // segments 4 and 5
	for i, keep := range []bool{true, false, false} {
		if _, err := r.Run(ctx, dlqdump.RunOptions{Select: sel, DryRun: true, KeepForPass: keep}); err != nil {
			t.Fatal(err)
		}
		read = bc.Take()
		want := sizes[names[4]]
		if i == 1 {
			want = 0 // kept by the dry run before
		}
		if read[names[4]] != want {
			t.Errorf("dry run %d: %d bytes of segment 4 read, want %d", i, read[names[4]], want)
		}
	}
}

// A segment restored and removed by another restorer after a dry run kept
// its bytes is not delivered again from them: the pass claims and opens it
// as it would, and does not find it.
func TestKeptSegmentRemovedIsNotDelivered(t *testing.T) {
	st := memsink.New()
	names, _ := dumpPairs(t, st, 4)
	var delivered atomic.Int64
	r := newRestorer(t, dlqdump.Config{Reader: st, Queue: queueFunc(func(any) error { delivered.Add(1); return nil })})
	ctx := context.Background()
	sel := batchSel(t, 0) // segments 0 and 1
	if dry, err := r.Run(ctx, dlqdump.RunOptions{Select: sel, DryRun: true, KeepForPass: true}); err != nil || dry.Delivered != 20 {
		t.Fatalf("dry run: %+v, %v", dry, err)
	}
	if err := st.Delete(ctx, sink.AreaReady, names[0]); err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(ctx, dlqdump.RunOptions{Select: sel})
	if err != nil || rep.Delivered != 10 || delivered.Load() != 10 {
		t.Fatalf("pass: %+v (%d delivered), %v; want segment 1's 10 records alone", rep, delivered.Load(), err)
	}
}
