package dlqdump_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
)

// stopDest counts deliveries and calls after after each one.
type stopDest struct {
	collector
	n     atomic.Int64
	after func(n int64)
}

func (d *stopDest) Enqueue(x any) error {
	err := d.collector.Enqueue(x)
	if n := d.n.Add(1); d.after != nil {
		d.after(n)
	}
	return err
}

// RunOptions.Stop stops a pass at the next record, whatever its pace (a
// Rate of 5 items/s, with Concurrency 1 and 4), and Run returns the stop's
// cause; the next pass delivers the rest, nothing twice.
func TestRunStopsAtTheNextRecord(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(map[int]string{1: "one at a time", 4: "concurrency 4"}[conc], func(t *testing.T) {
			dir := t.TempDir()
			items := itemsN("st", 300)
			dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 64 * dlqdump.Kilobyte}, items)
			stop, cancel := context.WithCancelCause(context.Background())
			cause := errors.New("asked to stop")
			d := &stopDest{after: func(n int64) {
				if n == 3 {
					cancel(cause)
				}
			}}
			r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: d, MaxAttempts: 1, Concurrency: conc})
			rep, err := r.Run(t.Context(), dlqdump.RunOptions{Rate: 5, Stop: stop})
			if !errors.Is(err, cause) || rep.Delivered != uint64(d.n.Load()) || d.n.Load() > 3+int64(conc) {
				t.Fatalf("stopped after the 3rd delivery: %v, %d delivered (report %d); want the cause, at the next record", err, d.n.Load(), rep.Delivered)
			}
			if _, err := r.Run(t.Context(), dlqdump.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			got := d.delivered()
			for _, it := range items {
				if got[it] != 1 {
					t.Fatalf("%s delivered %d times, want once", it, got[it])
				}
			}
		})
	}
}

// OnProgress is called before each checkpoint goes to the store, with counts
// at least those of the checkpoint; its error keeps that checkpoint from the
// store and stops the pass.
func TestOnProgressBeforeEachCheckpoint(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: dlqdump.Kilobyte}, itemsN("cp", 300))
	rd := &fs.Reader{Directory: dir}
	d := &stopDest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: d, MaxAttempts: 1})
	var told uint64 // the counts OnProgress was given before the last checkpoint
	checkpoints := 0
	refuse := errors.New("the job's record cannot be written")
	_, err := r.Run(t.Context(), dlqdump.RunOptions{OnProgress: func(rep dlqdump.Report, checkpoint bool) error {
		if !checkpoint {
			return nil
		}
		// The checkpoint before this one is in the store: it says
		// no more than what was told then.
		if p := storedProgress(t, rd); p.Delivered > told {
			t.Errorf("a checkpoint says %d delivered; OnProgress was told %d before it", p.Delivered, told)
		}
		checkpoints++
		if checkpoints == 3 {
			return refuse
		}
		told = rep.Delivered
		return nil
	}})
	if !errors.Is(err, refuse) {
		t.Fatalf("Run = %v, want OnProgress's error", err)
	}
	if p := storedProgress(t, rd); p.Delivered != told || told == 0 {
		t.Fatalf("after the refused checkpoint the store says %d delivered, want the last one told, %d", p.Delivered, told)
	}
}

// storedProgress returns the progress in the only segment record of rd.
func storedProgress(t *testing.T, rd *fs.Reader) claims.Progress {
	t.Helper()
	for name, err := range rd.RecordNames(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := rd.ReadRecord(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := claims.Parse(data)
		p, err := claims.ParseProgress(rec.Progress)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	return claims.Progress{}
}
