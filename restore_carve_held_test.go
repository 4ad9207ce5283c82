package dlqdump_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// hookedRecords is a memsink.Store whose record reads and writes call
// hooks (onWrite after a write that succeeded).
type hookedRecords struct {
	*memsink.Store
	onRead  func(name string)
	onWrite func(name string, data []byte)
}

func (s *hookedRecords) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	if s.onRead != nil {
		s.onRead(name)
	}
	return s.Store.ReadRecord(ctx, name)
}

func (s *hookedRecords) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	v, err := s.Store.WriteRecord(ctx, name, data, ifVersion)
	if err == nil && s.onWrite != nil {
		s.onWrite(name, data)
	}
	return v, err
}

// A carving pass A (batches 0 and 1) whose side segment another carving
// pass B (batches 1 and 2) claims first, between A's release of the
// segment and A's claim of the side: B takes only batch 1 out of it. With
// WaitClaimed, A waits for B to let the side go and delivers its batch 0
// from it; without, A counts the side in Report.Claimed (a job retries).
// Before, A took "claimed by another pass" for "that pass delivers them":
// it ended with no error and nothing Claimed, its 20 batch-0 records left
// in a ready segment (a job running A completed).
func TestCarvedSideHeldByAnOverlappingPass(t *testing.T) {
	for _, wait := range []time.Duration{time.Minute, 0} {
		t.Run(fmt.Sprint("wait=", wait), func(t *testing.T) {
			base := carveStore(t, 60, 3)
			parent := base.Names(sink.AreaReady)[0]
			var (
				mu                   sync.Mutex
				armed                bool
				side                 string
				bHolds, letB         = make(chan struct{}), make(chan struct{})
				startB, holdB, freeB sync.Once
			)
			release := func() { freeB.Do(func() { close(letB) }) }
			defer release()
			sB := &hookedRecords{Store: base}
			sB.onWrite = func(name string, data []byte) {
				mu.Lock()
				s := side
				mu.Unlock()
				if name == s && strings.Contains(string(data), `"owner":"pass-b"`) {
					// B holds the side: until A looks at it again.
					holdB.Do(func() { close(bHolds); <-letB })
				}
			}
			dB := newCarveDest(nil)
			rb := newRestorer(t, dlqdump.Config{Reader: sB, Queue: dB, Owner: "pass-b"})
			selB, _ := selection.Parse("batch in (1, 2)", nil)
			bErr := make(chan error, 1)
			sA := &hookedRecords{Store: base}
			sA.onWrite = func(name string, data []byte) {
				// The save that drops the carved runs: the side is
				// claimable from here on.
				if name == parent && strings.Contains(string(data), `"sides":1`) && !strings.Contains(string(data), `"writing"`) {
					mu.Lock()
					defer mu.Unlock()
					armed = true
					for _, n := range base.Names(sink.AreaReady) {
						if n != parent {
							side = n
						}
					}
				}
			}
			sA.onRead = func(name string) {
				mu.Lock()
				hit := armed && name == side
				mu.Unlock()
				if !hit {
					return
				}
				first := false
				startB.Do(func() {
					first = true
					go func() {
						_, err := rb.Run(context.Background(), dlqdump.RunOptions{Select: selB, Carve: true, WaitClaimed: time.Minute})
						bErr <- err
					}()
					<-bHolds
				})
				if !first {
					release() // A looks at the side again: B goes on
				}
			}
			dA := newCarveDest(nil)
			ra := newRestorer(t, dlqdump.Config{Reader: sA, Queue: dA, Owner: "pass-a"})
			selA, _ := selection.Parse("batch in (0, 1)", nil)
			repA, errA := ra.Run(t.Context(), dlqdump.RunOptions{Select: selA, Carve: true, WaitClaimed: wait})
			release()
			if err := <-bErr; err != nil {
				t.Fatalf("pass B: %v", err)
			}
			if errA != nil {
				t.Fatalf("pass A: %+v, %v", repA, errA)
			}
			var a0 int
			for _, it := range dA.items() {
				if strings.HasPrefix(it, "0/") {
					a0++
				}
			}
			switch {
			case wait > 0 && (a0 != 20 || repA.Claimed != 0):
				t.Fatalf("pass A waiting for the side delivered %d of its 20 batch-0 records (report %+v)", a0, repA)
			case wait == 0 && a0 < 20 && repA.Claimed == 0:
				t.Fatalf("pass A ended as complete (nothing Claimed) having delivered %d of its 20 batch-0 records", a0)
			}
			rest := newCarveDest(nil)
			if _, err := newRestorer(t, dlqdump.Config{Reader: base, Queue: rest}).Run(t.Context(), dlqdump.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			onceEach(t, append(append(dA.items(), dB.items()...), rest.items()...), 60)
		})
	}
}
