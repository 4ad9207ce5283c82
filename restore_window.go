package dlqdump

import (
	"context"
	"sync"

	"github.com/dlqdump/dlqdump/segment"
)

// window delivers the records of a segment on Config.Concurrency goroutines
// and hands what became of each back to the segment's run in record order,
// so that its progress (and so every checkpoint) passes a record only when
// every record before it was delivered or set aside. The run's goroutine
// owns everything but the slots in flight, which belong to a delivering
// goroutine from the send on jobs to the send on their done.
type window struct {
	g      *segRun
	n      int // Config.Concurrency
	ctx    context.Context
	cancel context.CancelFunc
	jobs   chan *slot
	wg     sync.WaitGroup
	start  sync.Once

	q        []*slot // not yet applied, in record order, from head
	head     int
	inflight int     // deliveries in q
	taking   int     // records in q delivered or set aside: what RunOptions.Limit counts
	free     []*slot // slots to reuse
}

// slot is a record whose outcome waits for the records before it.
type slot struct {
	rec     segment.Record
	o       outcome
	item    any           // to deliver; nil once delivered
	send    bool          // a delivery: o is known once done is received
	retried uint64        // the delivery's retries
	done    chan struct{} // capacity 1: one send per delivery
}

// recordError is the error of a record applied after later records were
// handed out: the pass stops at that record, not at the one in hand.
type recordError struct {
	seq uint64
	err error
}

func (e *recordError) Error() string { return e.err.Error() }
func (e *recordError) Unwrap() error { return e.err }

// newWindow returns the window of a segment's run; its goroutines start with
// the first delivery, and stop with close.
func newWindow(g *segRun, n int) *window {
	ctx, cancel := context.WithCancel(g.ctx)
	return &window{g: g, n: n, ctx: ctx, cancel: cancel, jobs: make(chan *slot, n)}
}

// busy reports whether records wait for their outcome.
func (w *window) busy() bool { return w.head < len(w.q) }

// queued is the most slots the window holds: deliveries and the records
// after them, whose outcome must wait.
func (w *window) queued() int { return max(64, 16*w.n) }

// deliver hands a record to a delivering goroutine once fewer than
// Concurrency deliveries are in flight, applying outcomes until then.
func (w *window) deliver(rec *segment.Record, item any) error {
	for w.inflight >= w.n || len(w.q)-w.head >= w.queued() {
		if err := w.applyHead(); err != nil {
			return err
		}
	}
	w.start.Do(func() {
		w.wg.Add(w.n)
		for range w.n {
			go w.loop()
		}
	})
	s := w.slot(rec)
	s.item, s.send = item, true
	w.inflight++
	w.taking++
	w.jobs <- s // room: jobs holds at most the deliveries in flight, fewer than n
	return nil
}

// push queues an outcome known without a delivery behind those in flight.
func (w *window) push(rec *segment.Record, o outcome) error {
	for len(w.q)-w.head >= w.queued() {
		if err := w.applyHead(); err != nil {
			return err
		}
	}
	s := w.slot(rec)
	s.o = o
	if o.kind != skipped {
		w.taking++
	}
	return nil
}

func (w *window) slot(rec *segment.Record) *slot {
	var s *slot
	if n := len(w.free); n > 0 {
		s, w.free = w.free[n-1], w.free[:n-1]
	} else {
		s = &slot{done: make(chan struct{}, 1)}
	}
	s.rec = *rec
	w.q = append(w.q, s)
	return s
}

// loop is a delivering goroutine.
func (w *window) loop() {
	defer w.wg.Done()
	for s := range w.jobs {
		s.o = deliveryOutcome(w.g.deliver(w.ctx, w.ctx, s.item, &s.retried, true))
		s.item = nil
		s.done <- struct{}{}
	}
}

// applyHead waits for the first record's outcome and applies it. An error
// is a *recordError naming that record.
func (w *window) applyHead() error {
	s := w.q[w.head]
	w.q[w.head] = nil
	w.head++
	if w.head == len(w.q) {
		w.q, w.head = w.q[:0], 0
	}
	if s.send {
		<-s.done
		w.inflight--
		w.g.rep.Retried += s.retried
	}
	if s.send || s.o.kind != skipped {
		w.taking--
	}
	seq := s.rec.Seq
	err := w.g.done(&s.rec, s.o)
	w.recycle(s)
	if err != nil {
		return &recordError{seq: seq, err: err}
	}
	return nil
}

func (w *window) recycle(s *slot) {
	*s = slot{done: s.done}
	w.free = append(w.free, s)
}

// drain applies every outcome, in order, and stops at the first error.
func (w *window) drain() error {
	for w.busy() {
		if err := w.applyHead(); err != nil {
			return err
		}
	}
	return nil
}

// abandon drops the outcomes not applied: the deliveries in flight are
// cancelled and waited for (an Enqueue in progress ends when it returns);
// the pass stops before those records, so they are delivered again.
func (w *window) abandon() {
	w.cancel()
	for w.busy() {
		s := w.q[w.head]
		w.q[w.head] = nil
		w.head++
		if s.send {
			<-s.done
			w.inflight--
			w.g.rep.Retried += s.retried
		}
		w.recycle(s)
	}
	w.q, w.head, w.taking = w.q[:0], 0, 0
}

// close abandons what is left and stops the delivering goroutines.
func (w *window) close() {
	w.abandon()
	close(w.jobs)
	w.wg.Wait()
}
