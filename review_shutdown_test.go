package dlqdump_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

// stuckDest blocks every Enqueue until release is closed (a destination
// that hangs: an HTTP call without a timeout, a blocking queue).
type stuckDest struct {
	started chan struct{}
	release chan struct{}
	once    chan struct{}
}

func (d *stuckDest) Enqueue(any) error {
	select {
	case d.once <- struct{}{}:
		close(d.started)
	default:
	}
	<-d.release
	return nil
}

// Shutdown is documented as Close bounded by ctx, and Close as waiting at
// most twice the lease. With Start, Shutdown cancels the background loops
// and then waits for them (bgWG.Wait) without any bound: a pass stuck in
// the destination keeps Shutdown, and Close, from returning at all.
func TestReviewShutdownHonoursItsDeadline(t *testing.T) {
	// Not t.TempDir: the pass Shutdown gave up on writes its claim record
	// once released, after the test, so the directory is removed once that
	// pass let go of it.
	dir, err := os.MkdirTemp("", "dlqdump-review-shutdown-")
	if err != nil {
		t.Fatal(err)
	}
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, itemsN("s", 10))
	dst := &stuckDest{started: make(chan struct{}), release: make(chan struct{}), once: make(chan struct{}, 1)}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Decoder: decoder.Fallthrough{AsString: true}, Lease: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(dst.release)
		// The released pass stops at its next block and records where:
		// remove the directory once nothing writes into it any more.
		deadline := time.Now().Add(30 * time.Second)
		for os.RemoveAll(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	<-dst.started
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		done <- r.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		t.Logf("Shutdown returned %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown with a 100ms deadline has not returned after 5s: it waits for the pass stuck in the destination")
	}
}
