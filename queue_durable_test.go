package dlqdump_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// Durable mode, a sync that fails at the seal right after a block was written
// (issue 11, defect 2): after a failed fsync the segment is cut back to its
// last synced size, so every block written since, the fresh one included,
// must be written again. Every record whose Enqueue returned nil is in the
// dump.
//
// The scenario: the first sync (of block A) is held while a second record
// joins the next block B and Flush cuts B with a seal, then fails; the retry
// writes A and B back to back, and the sync at B's seal fails too. Whether B
// is compressed by the time A is rewritten is up to the scheduler, so a round
// that did not reach the scenario is run again.
func TestDurableFailedSyncAtSealRewritesFreshBlock(t *testing.T) {
	for round := 1; ; round++ {
		if durableSealSyncRound(t) {
			t.Logf("scenario reached in round %d", round)
			return
		}
		if round == 30 {
			t.Fatalf("%d rounds did not reach a failing sync with two blocks written since the last good one", round)
		}
	}
}

func durableSealSyncRound(t *testing.T) (reached bool) {
	dir := t.TempDir()
	var (
		mu          sync.Mutex
		pending     int // block writes since the last good sync or truncate
		fired       bool
		syncEntered = make(chan struct{})
		release     = make(chan struct{})
	)
	hw := &hookWriter{Writer: &fs.Writer{Directory: dir}}
	hw.hook = func(op string, n int) error {
		mu.Lock()
		defer mu.Unlock()
		switch op {
		case "write":
			pending++
		case "truncate":
			pending = 0
		case "sync":
			if n == 1 {
				mu.Unlock()
				close(syncEntered)
				<-release
				mu.Lock()
				return errInjected
			}
			if pending >= 2 && !fired {
				fired = true
				return errInjected
			}
			pending = 0
		}
		return nil
	}
	events := newDumpEvents()
	q := newQueue(t, dlqdump.Config{Writer: hw, Durable: true, EnqueueTimeout: time.Minute, FlushInterval: time.Hour, MetricsWriter: events})
	results := make(chan error, 2)
	go func() { results <- q.Enqueue("r1") }()
	<-events.dumped
	<-syncEntered // A is written, its sync held
	go func() { results <- q.Enqueue("r2") }()
	<-events.dumped // r2 is in the block being filled
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_ = q.Flush(cancelled) // cuts B, with a seal, and does not wait
	close(release)
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	reached = fired
	mu.Unlock()
	got := map[string]int{}
	for _, r := range readDir(t, dir) {
		got[r.Payload]++
	}
	for _, p := range []string{"r1", "r2"} {
		if got[p] != 1 {
			t.Fatalf("record %s acknowledged and found %d times in the dump (scenario reached: %v); dump: %v", p, got[p], reached, got)
		}
	}
	if l := leftovers(t, dir); len(l) > 0 {
		t.Fatalf("files left behind: %v", l)
	}
	return reached
}
