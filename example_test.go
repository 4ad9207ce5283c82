package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
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
