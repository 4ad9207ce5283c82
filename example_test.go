package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/encoder"
	"github.com/dlqdump/dlqdump/fs"
)

// failingWorker fails every item, so koykov's queue dead-letters it.
type failingWorker struct{}

func (failingWorker) Do(any) error { return errors.New("downstream unavailable") }

// Attach the dumper to a koykov queue as its DLQ: items that fail processing
// are dumped into segments in a directory.
func Example() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)

	dump, err := dlqdump.NewQueue(&dlqdump.Config{
		Version:  dlqdump.NewVersion(1, 0, 0, 0),
		Capacity: 16 * dlqdump.Megabyte,
		Writer:   &fs.Writer{Directory: dir},
		Source:   "orders",
	})
	if err != nil {
		log.Fatal(err)
	}
	q, err := queue.New(&queue.Config{
		Capacity:  100,
		Workers:   1,
		Worker:    failingWorker{},
		DLQ:       dump,
		FailToDLQ: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		_ = q.Enqueue(fmt.Sprintf("order-%d", i))
	}
	// Closes the koykov queue, waits until its worker has handled every
	// order (failing them into the dump), then closes the dump, which
	// publishes the last segment.
	if err := dump.CloseAfter(q); err != nil {
		log.Fatal(err)
	}
	fmt.Println("records dumped:", dump.Stats().Records, "segments:", dump.Stats().Segments)
	// Output: records dumped: 3 segments: 1
}

// README:begin Order
// Order is your queue's item. As a dlqdump.HeaderCarrier it tells the dump
// why it is a dead letter, which koykov does not: it hands its DLQ the item
// alone, in the same call for a leak and for a failure.
type Order struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`

	failure error           // set by the worker that failed it
	dumped  dlqdump.Headers // set by the Restorer: the headers it was dumped with
}

// Fail records why a worker failed the order, for the dump.
func (o *Order) Fail(err error) error {
	o.failure = err
	return err
}

// DLQHeaders says why the order is a dead letter: a worker failed it, or it
// never reached one (the queue was full).
func (o *Order) DLQHeaders() dlqdump.Headers {
	h := dlqdump.Headers{dlqdump.HeaderReason: "leak"}
	if o.failure != nil {
		h = dlqdump.Headers{dlqdump.HeaderReason: "failed", dlqdump.HeaderError: o.failure.Error()}
	}
	if n, ok := o.dumped[dlqdump.HeaderReplays]; ok {
		h[dlqdump.HeaderReplays] = n // restores so far: Config.MaxReplays ends a loop
	}
	return h
}

// SetDLQHeaders is called by the Restorer with the headers the order was
// dumped with.
func (o *Order) SetDLQHeaders(h dlqdump.Headers) { o.dumped = h }

// orderWorker is the koykov queue's Worker.
type orderWorker struct {
	process func(*Order) error
}

// Do processes an order; one that fails goes to the dump (FailToDLQ), with
// its error.
func (w orderWorker) Do(x any) error {
	o := x.(*Order) // what you enqueue, and what decoder.JSONOf[*Order]() restores
	if err := w.process(o); err != nil {
		return o.Fail(err)
	}
	return nil
}

// README:end Order

// docs/DUMP.md's first snippet (section "Attach a dump to a koykov queue"), in
// the program the issue 20 reporter wrote from the README: producers, a
// worker failing one order in five, and the README's shutdown running while
// the queue is full and every worker busy. Every order accepted is processed
// or stored, with the reason it was dumped.
func Example_attach() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	var calls, processed, accepted atomic.Int64
	busy, gate := make(chan struct{}, 8), make(chan struct{})
	worker := orderWorker{process: func(o *Order) error {
		select {
		case busy <- struct{}{}: // the first eight calls, one per worker
		default:
		}
		<-gate // held until the producers are done: the shutdown starts mid-flight
		if calls.Add(1)%5 == 0 {
			return errors.New("payment service: timeout")
		}
		processed.Add(1)
		return nil
	}}
	var heldAtShutdown int
	func() {
		// README:begin
		dump, err := dlqdump.NewQueue(&dlqdump.Config{
			Version:  dlqdump.NewVersion(1, 0, 0, 0), // the version of your items' encoding
			Capacity: 64 * dlqdump.Megabyte,          // largest segment
			Encoder:  encoder.JSON{},                 // your own types, here *Order (see "Your items")
			Writer:   &fs.Writer{Directory: dir},     // e.g. "/var/lib/app/dlq"
			Source:   "orders",                       // stored as a header on every record
		})
		if err != nil {
			log.Fatal(err)
		}
		q, err := queue.New(&queue.Config{
			Capacity:  10_000,
			Workers:   8,      // a fixed pool (see CloseAfter)
			Worker:    worker, // an orderWorker (see below)
			DLQ:       dump,   // leaked items (queue full) go to the dump
			FailToDLQ: true,   // and so do items whose Worker.Do failed
		})
		if err != nil {
			log.Fatal(err)
		}
		defer func() {
			// Closes q, waits until its workers have handled what it holds
			// (what fails goes to the dump), then closes the dump: returns
			// once every dead letter is stored where readers find it.
			if err := dump.CloseAfter(q); err != nil {
				log.Print(err)
			}
		}()
		// README:end

		var wg sync.WaitGroup
		for p := range 4 {
			wg.Go(func() {
				for i := p; i < 20_000; i += 4 {
					if q.Enqueue(&Order{ID: fmt.Sprintf("o-%d", i), Amount: int64(i)}) == nil {
						accepted.Add(1)
					}
				}
			})
		}
		wg.Wait() // the producers stop before the shutdown, as they must
		for range 8 {
			<-busy // every worker holds an order
		}
		heldAtShutdown = q.Size()
		close(gate)
	}()
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Version: dlqdump.NewVersion(1, 0, 0, 0), Reader: &fs.Reader{Directory: dir},
		Decoder: decoder.JSONOf[*Order](), Queue: printQueue{}})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the queue was full when the shutdown began:", heldAtShutdown == 10_000)
	fmt.Println("accepted = processed + stored:", accepted.Load() == processed.Load()+int64(rep.Delivered))
	fmt.Println("stored failures:", rep.ByReason["failed"] == uint64(calls.Load()-processed.Load()), "stored leaks:", rep.ByReason["leak"] > 0, "other reasons:", len(rep.ByReason)-2)
	// Output:
	// the queue was full when the shutdown began: true
	// accepted = processed + stored: true
	// stored failures: true stored leaks: true other reasons: 0
}

// stored says how many records a restore would deliver from rd, of any
// Version.
func stored(rd dlqdump.Reader) string {
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{}, Queue: printQueue{},
		VersionCompatible: func(_, _ dlqdump.Version) bool { return true }})
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d records stored", rep.Delivered)
}

// docs/DUMP.md's envelope snippet: an item dumped with the headers saying why.
func Example_envelope() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	if err != nil {
		log.Fatal(err)
	}
	deadLetter := func(order string, failure error) error {
		// README:begin
		if err := dump.Enqueue(dlqdump.Envelope{Item: order, Headers: dlqdump.Headers{
			dlqdump.HeaderReason: "failed", dlqdump.HeaderError: failure.Error(), dlqdump.HeaderAttempts: "3",
		}}); err != nil {
			return err // not accepted (ErrBackpressure, ErrClosed): nothing of it was stored
		}
		// README:end
		return nil
	}
	if err := deadLetter("order-1", errors.New("payment service: timeout after 5s")); err != nil {
		log.Fatal(err)
	}
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	r, _ := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{AsString: true}, Queue: printQueue{}})
	defer r.Close()
	rep, _ := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true})
	fmt.Println(rep.ByReason)
	// Output: map[failed:1]
}

// docs/RESTORE.md's restore snippet: a Restorer started in the background feeds
// the dump back into a koykov queue, whose worker gets its *Order back with
// the headers it was dumped with.
func Example_restore() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	dump, _ := dlqdump.NewQueue(&dlqdump.Config{Version: dlqdump.NewVersion(1, 0, 0, 0), Capacity: dlqdump.Megabyte,
		Encoder: encoder.JSON{}, Writer: &fs.Writer{Directory: dir}})
	for i, id := range []string{"o-1", "o-2", "o-3"} {
		o := &Order{ID: id, Amount: int64(10 * (i + 1))}
		if i == 1 {
			_ = o.Fail(errors.New("payment service: timeout"))
		}
		_ = dump.Enqueue(o)
	}
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	got := make(chan *Order, 3)
	q, err := queue.New(&queue.Config{Capacity: 100, Workers: 1, Worker: orderWorker{process: func(o *Order) error {
		got <- o
		return nil
	}}})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	func() {
		// README:begin
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Version:   dlqdump.NewVersion(1, 0, 0, 0),
			Reader:    &fs.Reader{Directory: dir}, // the dump's directory
			Decoder:   decoder.JSONOf[*Order](),   // what was dumped: see "Your items"
			Queue:     q,                          // the destination, usually the source queue
			AllowRate: 0.8,                        // deliver only while q.Rate() <= 0.8
			RateLimit: 500,                        // items per second, like SQS redrive velocity
		})
		if err != nil {
			log.Fatal(err)
		}
		defer r.Close()                   // stops the passes, saving where each stopped
		if err := r.Start(); err != nil { // background: a pass every CheckInterval (1s) until r.Close()
			log.Fatal(err)
		}
		// or one pass:    r.Restore(ctx)
		// or selective:   r.Run(ctx, dlqdump.RunOptions{Where: dlqdump.Headers{"reason": "failed"}, Since: t, Limit: 1000})
		// dry run:        rep, _ := r.Run(ctx, dlqdump.RunOptions{DryRun: true}); rep.ByReason
		// at a time, run once by any of N processes: a restore job (package jobs)
		// README:end
		for range 3 {
			o := <-got
			fmt.Printf("%T %s %d: reason %s, replays %s\n", o, o.ID, o.Amount, o.dumped[dlqdump.HeaderReason], o.dumped[dlqdump.HeaderReplays])
		}
	}()
	fmt.Println("left:", stored(&fs.Reader{Directory: dir}))
	// Output:
	// *dlqdump_test.Order o-1 10: reason leak, replays 1
	// *dlqdump_test.Order o-2 20: reason failed, replays 1
	// *dlqdump_test.Order o-3 30: reason leak, replays 1
	// left: 0 records stored
}

// countingQueue is a destination that counts what it accepts and closes
// done at the want-th.
type countingQueue struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (c *countingQueue) Enqueue(any) error {
	if c.n.Add(1) == c.want {
		close(c.done)
	}
	return nil
}

// Rate reports an empty queue (AllowRate compares with it).
func (c *countingQueue) Rate() float32 { return 0 }

func ExampleParseVersion() {
	v, err := dlqdump.ParseVersion("2.1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v, v.Major(), v == dlqdump.NewVersion(2, 1, 0, 0))
	// Output: 2.1.0.0 2 true
}

func ExampleParseMemorySize() {
	s, _ := dlqdump.ParseMemorySize("64MiB")
	fmt.Println(s, uint64(s), s == 64*dlqdump.Megabyte)
	// Output: 64MiB 67108864 true
}

// printQueue prints what it is given.
type printQueue struct{}

func (printQueue) Enqueue(x any) error { fmt.Printf("restored %s\n", x); return nil }

// Restore a dump into a destination queue: every ready segment is claimed,
// its records are decoded and enqueued, and the segment is deleted once all of
// them were accepted.
func ExampleRestorer() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	dump, _ := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	for _, order := range []string{"order-1", "order-2"} {
		_ = dump.Enqueue(dlqdump.Envelope{Item: order, Headers: dlqdump.Headers{dlqdump.HeaderReason: "leak"}})
	}
	_ = dump.Close()

	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader:  &fs.Reader{Directory: dir},
		Decoder: decoder.Fallthrough{AsString: true},
		Queue:   printQueue{}, // usually the queue the items leaked from
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("delivered:", rep.Delivered, "by reason:", rep.ByReason, "segments done:", rep.Segments)
	// Output:
	// restored order-1
	// restored order-2
	// delivered: 2 by reason: map[leak:2] segments done: 1
}
