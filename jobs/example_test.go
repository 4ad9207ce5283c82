package jobs_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/koykov/queue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/jobs"
	prommetrics "github.com/dlqdump/dlqdump/metrics/prometheus"
)

// A *prometheus.Writer counts a runner's jobs.
var _ jobs.Metrics = (*prommetrics.Writer)(nil)

// received counts what a destination got.
type received struct {
	mu sync.Mutex
	n  int
}

func (r *received) Enqueue(any) error {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
	return nil
}

// A job created by one process (or the CLI: dlqdump job create) and run by
// a runner in another: here both in one program, on a directory.
func Example_readme() {
	dir, err := os.MkdirTemp("", "dlq-jobs-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Version: dlqdump.NewVersion(1, 0, 0, 0), Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 300 {
		reason := []string{"failed", "leak", "deadline"}[i%3]
		if err := dump.Enqueue(dlqdump.Envelope{Item: fmt.Sprint("order-", i), Headers: dlqdump.Headers{dlqdump.HeaderReason: reason}}); err != nil {
			log.Fatal(err)
		}
	}
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	ordersQueue, billingQueue := &received{}, &received{}
	ctx := context.Background()
	var q queue.Enqueuer = ordersQueue
	at := time.Now().Add(time.Second)
	// README:begin
	// Anywhere, any process: a job is a record in the dump's store.
	store, err := jobs.Open(&fs.Reader{Directory: dir}) // or an *s3.Reader
	if err != nil {
		log.Fatal(err)
	}
	job, err := store.Create(ctx, jobs.Spec{
		ID:          "redrive-failed-2026-11-27", // a retry with the same ID creates no second job
		At:          at,                          // to the second (rounded up); never before
		Where:       map[string]string{dlqdump.HeaderReason: "failed"},
		Rate:        200, // items per second, this job alone
		Destination: "billing",
	})
	if err != nil {
		log.Fatal(err)
	}

	// In each replica: a runner with Restorers serving the destinations.
	var restorers []*dlqdump.Restorer
	for range 2 { // two jobs at once
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Version:      dlqdump.NewVersion(1, 0, 0, 0), // what the Queue dumps
			Reader:       &fs.Reader{Directory: dir},
			Decoder:      decoder.Fallthrough{AsString: true},
			Queue:        q,                                                  // destination ""
			Destinations: map[string]queue.Enqueuer{"billing": billingQueue}, // and "billing"
		})
		if err != nil {
			log.Fatal(err)
		}
		defer r.Close()
		restorers = append(restorers, r)
	}
	runner, err := jobs.NewRunner(store, restorers, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		log.Fatal(err)
	}
	defer runner.Close() // running jobs stop at the next record and are handed over to any runner

	// From outside: watch, pause, resume, cancel.
	job, err = store.Wait(ctx, job.ID, 100*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	// README:end
	fmt.Println(job.State, job.Delivered, billingQueue.n, ordersQueue.n, !job.Started.Before(at))
	// Output: completed 100 100 0 true
}
