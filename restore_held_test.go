package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// heldSignal is a slog handler that closes met at the first line saying a
// pass waits for a segment held by another restorer.
type heldSignal struct {
	once *sync.Once
	met  chan struct{}
}

func (h heldSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h heldSignal) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "waiting for a segment held by another restorer") {
		h.once.Do(func() { close(h.met) })
	}
	return nil
}
func (h heldSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h heldSignal) WithGroup(string) slog.Handler      { return h }

// heldStore dumps 3 segments of 10 records (headers batch=0, 1, 2) and
// takes the claim on the first for another owner: the store, the claim
// and the segments' names.
func heldStore(t *testing.T) (*memsink.Store, *claims.Claim, []string) {
	t.Helper()
	st := memsink.New()
	for s := range 3 {
		q := newQueue(t, dlqdump.Config{Writer: st.Writer()})
		for i := range 10 {
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("%d/%d", s, i), Headers: dlqdump.Headers{"batch": fmt.Sprint(s)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	names := st.Names(sink.AreaReady)
	other, err := claims.NewClaimer(st, "other", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := other.Claim(t.Context(), names[0])
	if err != nil {
		t.Fatal(err)
	}
	return st, cl, names
}

// A pass with WaitClaimed restores the segments no one holds first, then
// waits for the one another restorer holds and restores it once let go:
// nothing is left to the holder (Report.Claimed 0). Without it, the pass
// leaves the segment at once.
func TestRunWaitsForAHeldSegment(t *testing.T) {
	st, cl, names := heldStore(t)
	sig := heldSignal{once: &sync.Once{}, met: make(chan struct{})}
	var order []string
	var mu sync.Mutex
	r := newRestorer(t, dlqdump.Config{Reader: st, Logger: slog.New(sig), Queue: queueFunc(func(x any) error {
		mu.Lock()
		order = append(order, x.(string))
		mu.Unlock()
		return nil
	})})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil || rep.Claimed != 1 || rep.Delivered != 20 {
		t.Fatalf("a pass without WaitClaimed: %+v, %v; want segment %s left to its holder", rep, err, names[0])
	}
	go func() {
		<-sig.met
		_ = cl.Release(context.Background())
	}()
	rep, err = r.Run(t.Context(), dlqdump.RunOptions{WaitClaimed: time.Hour})
	if err != nil || rep.Claimed != 0 || rep.Delivered != 10 || rep.Segments != 1 {
		t.Fatalf("a pass with WaitClaimed: %+v, %v; want the held segment restored once let go", rep, err)
	}
	if len(order) != 30 || order[20] != "0/0" || order[29] != "0/9" {
		t.Fatalf("delivered %d records, the held segment's last: %v", len(order), order[20:])
	}
}

// A stop (RunOptions.Stop: a job paused, cancelled, handed over) and Close
// end a pass's wait for a held segment at once; a wait bounded by
// WaitClaimed leaves the segment to its holder when it ends.
func TestWaitForAHeldSegmentEnds(t *testing.T) {
	for _, how := range []string{"stop", "close", "bound"} {
		t.Run(how, func(t *testing.T) {
			st, cl, _ := heldStore(t)
			defer cl.Release(context.Background())
			sig := heldSignal{once: &sync.Once{}, met: make(chan struct{})}
			var n atomic.Int64
			r := newRestorer(t, dlqdump.Config{Reader: st, Logger: slog.New(sig), Queue: queueFunc(func(any) error { n.Add(1); return nil })})
			stop, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			paused := errors.New("paused")
			wait := time.Hour
			switch how {
			case "stop":
				go func() { <-sig.met; cancel(paused) }()
			case "close":
				go func() { <-sig.met; _ = r.Close() }()
			case "bound":
				wait = 20 * time.Millisecond
			}
			rep, err := r.Run(t.Context(), dlqdump.RunOptions{WaitClaimed: wait, Stop: stop})
			switch how {
			case "stop":
				if !errors.Is(err, paused) {
					t.Fatalf("stopped while waiting: %v, want the stop's cause", err)
				}
			case "close":
				if !errors.Is(err, dlqdump.ErrClosed) {
					t.Fatalf("closed while waiting: %v, want ErrClosed", err)
				}
			case "bound":
				if err != nil || rep.Claimed != 1 {
					t.Fatalf("a wait of %s: %+v, %v; want the segment left to its holder", wait, rep, err)
				}
			}
			if rep.Delivered != 20 || n.Load() != 20 {
				t.Fatalf("%+v, %d delivered; want the 20 records of the segments not held", rep, n.Load())
			}
		})
	}
}
