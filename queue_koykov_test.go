package dlqdump_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/fs"
)

// flakyOrders is a koykov Worker that fails every failEvery-th order and
// counts the orders it processed.
type flakyOrders struct {
	failEvery int64
	calls     atomic.Int64
	processed atomic.Int64
}

func (w *flakyOrders) Do(x any) error {
	if _, ok := x.(order); !ok {
		return fmt.Errorf("a worker of orders was given a %T", x)
	}
	if w.calls.Add(1)%w.failEvery == 0 {
		return errors.New("payment service: timeout")
	}
	w.processed.Add(1)
	return nil
}

// produceOrders enqueues n orders into q from producers goroutines and
// returns how many q accepted.
func produceOrders(q *queue.Queue, n, producers int) int64 {
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += producers {
				if q.Enqueue(order{ID: fmt.Sprintf("o-%d", i), Amount: i}) == nil {
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return accepted.Load()
}

// Issue 20, defect 1: koykov's Close returns at once while its workers drain
// what it holds; a dump closed then refused the items failing in them, and
// koykov dropped the error (5,000 orders, capacity 100, one flaky worker: 20
// lost). CloseAfter closes the koykov queue, waits for its workers, then the
// dump: what was accepted is processed or stored, every time.
func TestCloseAfterLosesNothing(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}, Encoder: encoder.JSON{}})
		if err != nil {
			t.Fatal(err)
		}
		w := &flakyOrders{failEvery: 5}
		q, err := queue.New(&queue.Config{Capacity: 100, Workers: 1, Worker: w, DLQ: dump, FailToDLQ: true})
		if err != nil {
			t.Fatal(err)
		}
		accepted := produceOrders(q, 5000, 4)
		// The producers stopped; the queue holds up to 100 orders and its
		// worker is busy with them.
		if err := dump.CloseAfter(q); err != nil {
			t.Fatal(err)
		}
		stored := int64(len(readDir(t, dir)))
		st := dump.Stats()
		if processed := w.processed.Load(); processed+stored != accepted || st.Refused.Total() != 0 {
			t.Fatalf("round %d: %d accepted, %d processed + %d stored = %d; refused %+v (%v)",
				round, accepted, processed, stored, processed+stored, st.Refused, st.LastRefusal)
		}
	}
}

// The JSON of a stored order is the order.
func TestCloseAfterStoresOrdersAsJSON(t *testing.T) {
	dir := t.TempDir()
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}, Encoder: encoder.JSON{}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(&queue.Config{Capacity: 10, Workers: 1, Worker: &flakyOrders{failEvery: 1}, DLQ: dump, FailToDLQ: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(order{ID: "o-7", Amount: 7}); err != nil {
		t.Fatal(err)
	}
	if err := dump.CloseAfter(q); err != nil {
		t.Fatal(err)
	}
	recs := readDir(t, dir)
	var got order
	if len(recs) != 1 || json.Unmarshal([]byte(recs[0].Payload), &got) != nil || got != (order{ID: "o-7", Amount: 7}) {
		t.Fatalf("stored %+v", recs)
	}
}

// stuckWorker fails every item, after entered is sent and release closed.
type stuckWorker struct {
	entered chan struct{}
	release chan struct{}
}

func (w stuckWorker) Do(any) error {
	w.entered <- struct{}{}
	<-w.release
	return errors.New("failed after a long call")
}

// tapDLQ hands items to the dump and sends what it answered.
type tapDLQ struct {
	dump    *dlqdump.Queue
	answers chan error
}

func (d tapDLQ) Enqueue(x any) error {
	err := d.dump.Enqueue(x)
	d.answers <- err
	return err
}

// ShutdownAfter is bounded by its context: a worker that does not finish
// is reported, the dump is shut down anyway, and what fails in that worker
// afterwards is refused and counted, not silently lost.
func TestShutdownAfterBoundedByContext(t *testing.T) {
	dir := t.TempDir()
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	if err != nil {
		t.Fatal(err)
	}
	w := stuckWorker{entered: make(chan struct{}, 1), release: make(chan struct{})}
	answers := make(chan error, 1)
	q, err := queue.New(&queue.Config{Capacity: 10, Workers: 1, Worker: w, DLQ: tapDLQ{dump, answers}, FailToDLQ: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue("order-1"); err != nil {
		t.Fatal(err)
	}
	<-w.entered
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = dump.ShutdownAfter(ctx, q)
	if err == nil || !strings.Contains(err.Error(), "had not stopped (1 running") || !errors.Is(err, context.Canceled) {
		t.Fatalf("ShutdownAfter = %v, want the running worker named", err)
	}
	close(w.release)
	if err := <-answers; !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("the late dead letter was answered %v, want ErrClosed", err)
	}
	if st := dump.Stats(); st.Refused.Closed != 1 {
		t.Fatalf("Stats().Refused = %+v, want the late dead letter counted", st.Refused)
	}
}

// A koykov queue closed already, or one that failed to start, is fine.
func TestCloseAfterClosedOrFailedFeeder(t *testing.T) {
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := queue.New(&queue.Config{Capacity: 10, Workers: 2, Worker: &flakyOrders{failEvery: 2}, DLQ: dump, FailToDLQ: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := dump.CloseAfter(q); err != nil {
		t.Fatalf("CloseAfter a closed queue: %v", err)
	}
	dump2, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := queue.New(&queue.Config{Capacity: 10, DLQ: dump2}) // no worker
	if err == nil {
		t.Fatal("queue.New without a worker succeeded")
	}
	if err := dump2.CloseAfter(failed); err != nil {
		t.Fatalf("CloseAfter a queue that failed to start: %v", err)
	}
	if err := dump2.CloseAfter(failed); !errors.Is(err, dlqdump.ErrClosed) {
		t.Fatalf("a second CloseAfter = %v, want ErrClosed", err)
	}
}

// With a balanced pool koykov v1.1.6 marks its workers stopped while one may
// still be in Worker.Do (see CloseAfter): what fails then is refused. It is
// never lost without a trace: processed + stored + refused = accepted.
func TestCloseAfterBalancedPoolCountsWhatItCannotKeep(t *testing.T) {
	dir := t.TempDir()
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}, Encoder: encoder.JSON{}})
	if err != nil {
		t.Fatal(err)
	}
	w := &flakyOrders{failEvery: 3}
	// Large enough never to be full: a balanced koykov queue found full by
	// its heartbeat writes its status, which its String reads without
	// synchronisation (a race in koykov v1.1.6 the race detector reports).
	q, err := queue.New(&queue.Config{Capacity: 5000, WorkersMin: 1, WorkersMax: 4, HeartbeatInterval: 5 * time.Millisecond,
		Worker: w, DLQ: dump, FailToDLQ: true})
	if err != nil {
		t.Fatal(err)
	}
	accepted := produceOrders(q, 3000, 2)
	if err := dump.CloseAfter(q); err != nil {
		t.Fatal(err)
	}
	stored := int64(len(readDir(t, dir)))
	refused := int64(dump.Stats().Refused.Closed)
	if processed := w.processed.Load(); processed+stored+refused != accepted {
		t.Fatalf("%d accepted, %d processed + %d stored + %d refused = %d", accepted, processed, stored, refused, processed+stored+refused)
	}
}
