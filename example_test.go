package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
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
	for dump.Stats().Records < 3 { // wait for the worker to fail them all
		time.Sleep(time.Millisecond)
	}
	_ = q.Close()
	if err := dump.Close(); err != nil { // publishes the last segment
		log.Fatal(err)
	}
	fmt.Println("records dumped:", dump.Stats().Records, "segments:", dump.Stats().Segments)
	// Output: records dumped: 3 segments: 1
}

// The README's first snippet (section "Attach a dump to a koykov queue"), as
// a program runs it: the dump and the queue, closed when the program ends,
// after which everything dumped is stored.
func Example_attach() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	worker := failingWorker{}
	func() {
		// README:begin
		dump, err := dlqdump.NewQueue(&dlqdump.Config{
			Version:  dlqdump.NewVersion(1, 0, 0, 0), // the version of your items' encoding
			Capacity: 64 * dlqdump.Megabyte,          // largest segment
			Writer:   &fs.Writer{Directory: dir},     // e.g. "/var/lib/app/dlq"
			Source:   "orders",                       // stored as a header on every record
		})
		if err != nil {
			log.Fatal(err)
		}
		defer func() {
			// Returns once everything accepted is stored where readers
			// find it; an error says what is not, and why.
			if err := dump.Close(); err != nil {
				log.Print(err)
			}
		}()

		q, err := queue.New(&queue.Config{
			Capacity:  10_000,
			Workers:   8,
			Worker:    worker,
			DLQ:       dump, // leaked items (queue full) go to the dump
			FailToDLQ: true, // and so do items that failed MaxRetries times
		})
		if err != nil {
			log.Fatal(err)
		}
		defer q.Close() // deferred last, runs first: the queue stops feeding the dump before it closes
		// README:end

		for i := range 3 {
			_ = q.Enqueue(fmt.Sprintf("order-%d", i))
		}
		for dump.Stats().Records < 3 { // wait for the workers to fail them all
			time.Sleep(time.Millisecond)
		}
	}()
	fmt.Println(stored(&fs.Reader{Directory: dir}))
	// Output: 3 records stored
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

// The README's envelope snippet: an item dumped with the headers saying why.
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

// The README's restore snippet: a Restorer started in the background feeds
// the dump back into the destination queue.
func Example_restore() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	dump, _ := dlqdump.NewQueue(&dlqdump.Config{Version: dlqdump.NewVersion(1, 0, 0, 0), Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	for _, order := range []string{"order-1", "order-2", "order-3"} {
		_ = dump.Enqueue(order)
	}
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	q := &countingQueue{want: 3, done: make(chan struct{})}
	func() {
		// README:begin
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Version:   dlqdump.NewVersion(1, 0, 0, 0),
			Reader:    &fs.Reader{Directory: dir}, // the dump's directory
			Decoder:   decoder.Fallthrough{},      // or decoder.Unmarshaller / decoder.JSONOf[Order]()
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
		// at a time:      r.RunAt(ctx, time.Date(2026, 11, 23, 3, 0, 0, 0, loc), dlqdump.RunOptions{})
		// README:end
		<-q.done
	}()
	fmt.Println("restored:", q.n.Load(), "left:", stored(&fs.Reader{Directory: dir}))
	// Output: restored: 3 left: 0 records stored
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
