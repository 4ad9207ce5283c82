package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// benchJobs measures restore jobs: the cost of a runner's poll (time, and
// S3 requests) while many jobs are pending for tomorrow, and how late jobs
// due now start beside them.
//
//	go run ./cmd/dlqdump-bench jobs -pending 100,100000 -due 200
//
// With "one-store" first, it runs many jobs over one store at once
// instead (jobs_store.go).
func benchJobs(args []string) error {
	if len(args) > 0 && args[0] == "one-store" {
		return benchJobsOneStore(args[1:])
	}
	fl := flag.NewFlagSet("jobs", flag.ExitOnError)
	pendingList := fl.String("pending", "100,100000", "jobs pending for tomorrow, comma-separated counts")
	due := fl.Int("due", 200, "jobs due over -span, each over a segment of its own, run beside them")
	span := fl.Duration("span", 10*time.Second, "the span the -due jobs are due over")
	stores := fl.String("stores", "fs,s3", "fs, s3 (versitygw when it can be started, else gofakes3)")
	_ = fl.Parse(args)
	var pendings []int
	for _, s := range strings.Split(*pendingList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return fmt.Errorf("-pending %q: want counts", *pendingList)
		}
		pendings = append(pendings, n)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tpending\tpoll\tS3 requests per poll\tdue jobs\tS3 requests per job\tstart delay p50\tp99\tmax\t")
	for _, store := range strings.Split(*stores, ",") {
		for _, p := range pendings {
			row, err := benchJobsOne(strings.TrimSpace(store), p, *due, *span)
			if err != nil {
				return err
			}
			fmt.Fprintln(tw, row)
			fmt.Fprintf(os.Stderr, "%s, %d pending: done\n", store, p)
		}
	}
	return tw.Flush()
}

// countingTransport counts the HTTP requests of an S3 client.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func benchJobsOne(store string, pending, due int, span time.Duration) (string, error) {
	ctx := context.Background()
	var rd sink.Reader
	var ct *countingTransport
	var byOp *s3test.Counter
	var st drainers.Store
	switch store {
	case "fs":
		dir, err := os.MkdirTemp("", "dlqdump-bench-jobs-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		st = drainers.Store{Dir: dir}
		rd = &fs.Reader{Directory: dir}
	case "s3":
		srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-bench"})
		if err != nil {
			if srv, stop, err = s3test.NewFake(nil); err != nil {
				return "", err
			}
		}
		defer stop()
		store = srv.Name
		ct = &countingTransport{next: http.DefaultTransport}
		byOp = &s3test.Counter{}
		client := srv.Client(func(o *awss3.Options) {
			o.HTTPClient = byOp.Wrap(&http.Client{Transport: ct, Timeout: time.Minute})
		})
		prefix := s3test.UniquePrefix("bench-jobs")
		st = drainers.Store{S3: srv, Prefix: prefix}
		rd = &s3.Reader{Client: client, Bucket: srv.Bucket, Prefix: prefix}
	default:
		return "", fmt.Errorf("-stores: unknown store %q", store)
	}
	js, err := jobs.Open(rd)
	if err != nil {
		return "", err
	}
	// The pending jobs, due tomorrow.
	tomorrow := time.Now().Add(24 * time.Hour)
	if err := createJobs(ctx, js, pending, func(i int) jobs.Spec {
		return jobs.Spec{ID: fmt.Sprintf("later-%07d", i), At: tomorrow}
	}); err != nil {
		return "", err
	}
	// A runner's poll with nothing due.
	d := &discard{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d})
	if err != nil {
		return "", err
	}
	defer r.Close()
	rn, err := jobs.NewRunner(js, []*dlqdump.Restorer{r}, nil)
	if err != nil {
		return "", err
	}
	// The first poll also moves the markers that came within the hour
	// (every 6 minutes): not counted.
	if _, err := rn.RunDue(ctx); err != nil {
		return "", err
	}
	const polls = 20
	var before int64
	if ct != nil {
		before = ct.n.Load()
	}
	start := time.Now()
	for range polls {
		if _, err := rn.RunDue(ctx); err != nil {
			return "", err
		}
	}
	perPoll := time.Since(start) / polls
	reqs := "-"
	if ct != nil {
		reqs = fmt.Sprintf("%.1f", float64(ct.n.Load()-before)/polls)
	}
	_ = rn.Close()
	// Jobs due now, each over a segment, run by a runner of 4
	// Restorers beside the pending ones.
	if _, err := drainers.Seed(ctx, st.Reader(), due, 5); err != nil {
		return "", err
	}
	var names []string
	for n, err := range sink.Names(ctx, rd, sink.AreaReady) {
		if err != nil {
			return "", err
		}
		names = append(names, n)
	}
	slices.Sort(names)
	first := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	if err := createJobs(ctx, js, len(names), func(i int) jobs.Spec {
		return jobs.Spec{ID: fmt.Sprintf("now-%07d", i), At: first.Add(span * time.Duration(i) / time.Duration(len(names))), Segments: []string{names[i]}}
	}); err != nil {
		return "", err
	}
	var rs []*dlqdump.Restorer
	for range 4 {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d})
		if err != nil {
			return "", err
		}
		defer r.Close()
		rs = append(rs, r)
	}
	rn, err = jobs.NewRunner(js, rs, nil)
	if err != nil {
		return "", err
	}
	if err := rn.Start(); err != nil {
		return "", err
	}
	if byOp != nil {
		byOp.Reset()
	}
	// The waiting reads through a client of its own: not counted.
	wjs, err := jobs.Open(st.Reader())
	if err != nil {
		return "", err
	}
	var delays []time.Duration
	for i := range names {
		j, err := wjs.Wait(ctx, fmt.Sprintf("now-%07d", i), 50*time.Millisecond)
		if err != nil {
			return "", err
		}
		delays = append(delays, j.Late())
	}
	_ = rn.Close()
	perJob := "-"
	if byOp != nil {
		c := byOp.Counts()
		perJob = fmt.Sprintf("%.1f", float64(c.Total())/float64(len(names)))
		fmt.Fprintf(os.Stderr, "%s, %d pending: S3 requests per due job by operation: %s\n", store, pending, c.Per(len(names)))
	}
	slices.Sort(delays)
	n := len(delays)
	return fmt.Sprintf("%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t", store, pending, perPoll.Round(100*time.Nanosecond), reqs, n, perJob,
		delays[n/2].Round(time.Millisecond), delays[n*99/100].Round(time.Millisecond), delays[n-1].Round(time.Millisecond)), nil
}

// createJobs creates n jobs, 16 at a time.
func createJobs(ctx context.Context, js *jobs.Store, n int, spec func(i int) jobs.Spec) error {
	return parallel(16, n, func(i int) error {
		_, err := js.Create(ctx, spec(i))
		return err
	})
}

type discard struct{}

func (discard) Enqueue(any) error { return nil }
