package dlqdump_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/faults"
	"github.com/dlqdump/dlqdump/sink"
)

// fenceLease is the lease of the restorers of the fencing tests: a paused
// one is taken over that long after it stopped renewing.
const fenceLease = 200 * time.Millisecond

func fenceRestorer(t *testing.T, rd sink.Reader, dst *countingDest, owner string) *dlqdump.Restorer {
	t.Helper()
	return newRestorer(t, dlqdump.Config{Reader: rd, Decoder: poisonDecoder{}, Queue: dst, Lease: fenceLease, Owner: owner})
}

// untilDone runs passes of r with opts until done says the store is as
// wanted, waiting a third of a lease between passes (a claim left by a
// paused restorer is taken over once seen unchanged for its lease).
func untilDone(t *testing.T, r *dlqdump.Restorer, opts dlqdump.RunOptions, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // far above the few leases needed
	for {
		_, _ = r.Run(t.Context(), opts)
		if done() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done a minute later: %+v", r.Stats())
		}
		timer := time.NewTimer(fenceLease / 3)
		select {
		case <-timer.C:
		case <-t.Context().Done():
			timer.Stop()
			t.Fatal(t.Context().Err())
		}
	}
}

// readyNames returns the names of the ready segments in dir.
func readyNames(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.dlq"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Issue 19, defect 2: a filtered pass that stalls past its lease between
// setting its remainder's records aside and publishing the remainder must
// not publish it after another restorer took the segment over, wrote the
// same remainder, and it was restored: its records would be delivered twice.
func TestStalledPassNeverPublishesAfterTakeover(t *testing.T) {
	dir := t.TempDir()
	// Records alternate between selected and not, in 2 KiB blocks: a
	// filtered pass leaves the others in the segment, until its progress
	// lists as many runs as a claim record holds (claims.MaxAside, one
	// per block); then it copies them into a ready remainder, which is
	// what a stall must not publish twice.
	items := writeSegment(t, dir, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), 30_000, 2<<10, func(i int) string {
		return []string{"failed", "leak"}[i%2]
	})
	failed := dlqdump.RunOptions{Where: dlqdump.Headers{dlqdump.HeaderReason: "failed"}}

	// A pauses, as a stopped process would, when it creates its first
	// segment: the remainder.
	in := faults.New(faults.Point{Op: faults.OpReaderCreate, K: 1, Mode: faults.Pause})
	paused := make(chan struct{})
	in.OnFire = func(faults.Point) { close(paused) }
	dst := &countingDest{}
	a := fenceRestorer(t, faults.WrapReader(&fs.Reader{Directory: dir}, in), dst, "a")
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Run(context.Background(), failed)
		aDone <- err
	}()
	select {
	case <-paused:
	case err := <-aDone:
		t.Fatalf("the pass ended without creating its remainder: %v", err)
	}

	// B takes the segment over after A's lease, writes the remainder and
	// finishes it; then restores everything.
	b := fenceRestorer(t, &fs.Reader{Directory: dir}, dst, "b")
	untilDone(t, b, dlqdump.RunOptions{}, func() bool { return len(readyNames(t, dir)) == 0 })

	// A goes on.
	in.Resume()
	errA := <-aDone
	t.Logf("the paused pass ended with: %v", errA)
	if errA == nil || !errors.Is(errA, dlqdump.ErrLeaseLost) {
		t.Errorf("the paused pass returned %v, want an error wrapping ErrLeaseLost", errA)
	}
	// Whatever it left is restored now, if anything.
	c := fenceRestorer(t, &fs.Reader{Directory: dir}, dst, "c")
	if _, err := c.Run(t.Context(), dlqdump.RunOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, it := range items {
		if dst.n[it] == 0 {
			t.Errorf("%s never delivered", it)
		}
	}
	if twice, _ := dst.twice(); twice > 0 {
		t.Fatalf("%d records delivered twice: the paused pass published its remainder after the takeover", twice)
	}
	if left := readyNames(t, dir); len(left) != 0 {
		t.Fatalf("ready segments left: %v", left)
	}
	staged, _ := os.ReadDir(filepath.Join(dir, fs.StagingDir))
	if len(staged) != 0 {
		t.Fatalf("%d staged segments left after a pass swept them", len(staged))
	}
}
