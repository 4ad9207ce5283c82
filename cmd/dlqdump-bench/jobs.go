package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
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
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/internal/drainers"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// benchJobs measures restore jobs: the cost of a runner's poll (time, and
// S3 requests) while many jobs are pending for tomorrow, and how late jobs
// due now start beside them, and what each costs the runner: S3 requests,
// and CPU time in the runner's process (this one, which does nothing else
// meanwhile), apart from the S3 server's (versitygw, a process of its own).
//
//	go run ./cmd/dlqdump-bench jobs -pending 100,100000 -due 200
//	go run ./cmd/dlqdump-bench jobs -stores s3 -pending 0 -due 3000 -span 20s -restorers 16
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
	restorers := fl.Int("restorers", 4, "the Restorers of the runner of the -due jobs")
	cpuprofile := fl.String("cpuprofile", "", "write a CPU profile of the runner running the -due jobs to this file (of the last row)")
	memprofile := fl.String("memprofile", "", "write the allocations of the runner running the -due jobs to this file (of the last row; `go tool pprof -sample_index=alloc_space`)")
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
	fmt.Fprintln(tw, "store\tpending\tpoll\tS3 requests per poll\tdue jobs\tS3 requests per job\trunner CPU per job\tserver CPU per job\tstart delay p50\tp99\tmax\t")
	for _, store := range strings.Split(*stores, ",") {
		for _, p := range pendings {
			row, err := benchJobsOne(strings.TrimSpace(store), p, *due, *span, *restorers, *cpuprofile, *memprofile)
			if err != nil {
				return err
			}
			fmt.Fprintln(tw, row)
			fmt.Fprintf(os.Stderr, "%s, %d pending: done\n", store, p)
		}
	}
	return tw.Flush()
}

// countingClient counts the HTTP requests of an S3 client.
type countingClient struct {
	next awss3.HTTPClient
	n    atomic.Int64
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.Do(r)
}

func benchJobsOne(store string, pending, due int, span time.Duration, restorers int, cpuprofile, memprofile string) (string, error) {
	ctx := context.Background()
	var rd sink.Reader
	var ct *countingClient
	var byOp *s3test.Counter
	var st drainers.Store
	serverPID := 0
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
		store, serverPID = srv.Name, srv.PID
		byOp = &s3test.Counter{}
		// The SDK's own HTTP client (10 idle connections per host, as a
		// user's), counted.
		client := srv.Client(func(o *awss3.Options) {
			ct = &countingClient{next: o.HTTPClient}
			o.HTTPClient = byOp.Wrap(ct)
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
	for range restorers {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: d})
		if err != nil {
			return "", err
		}
		defer r.Close()
		rs = append(rs, r)
	}
	// This process does nothing but run the jobs until the last one
	// ends (the runner says so through its Metrics): its CPU time
	// meanwhile is the runner's.
	ended := &endedJobs{want: int64(len(names)), all: make(chan struct{})}
	rn, err = jobs.NewRunner(js, rs, &jobs.RunnerOptions{Metrics: ended})
	if err != nil {
		return "", err
	}
	if byOp != nil {
		byOp.Reset()
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return "", err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return "", err
		}
	}
	if memprofile != "" {
		runtime.GC()
		runtime.MemProfileRate = 64 << 10
	}
	cpu0, server0 := processCPU(), childproc.CPU(serverPID)
	if err := rn.Start(); err != nil {
		return "", err
	}
	select {
	case <-ended.all:
	case <-time.After(span + 10*time.Minute):
		return "", fmt.Errorf("%s: %d of %d due jobs ended within 10 minutes after the span", store, ended.n.Load(), len(names))
	}
	cpu, server := processCPU()-cpu0, childproc.CPU(serverPID)-server0
	if cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if memprofile != "" {
		if err := writeAllocs(memprofile); err != nil {
			return "", err
		}
	}
	perJob := "-"
	if byOp != nil {
		c := byOp.Counts()
		perJob = fmt.Sprintf("%.1f", float64(c.Total())/float64(len(names)))
		fmt.Fprintf(os.Stderr, "%s, %d pending: S3 requests per due job by operation: %s\n", store, pending, c.Per(len(names)))
	}
	_ = rn.Close()
	var delays []time.Duration
	for i := range names {
		j, err := js.Get(ctx, fmt.Sprintf("now-%07d", i))
		if err != nil {
			return "", err
		}
		if j.State != jobs.Completed {
			return "", fmt.Errorf("%s: job %s %s: %s", store, j.ID, j.State, j.Error)
		}
		delays = append(delays, j.Late())
	}
	slices.Sort(delays)
	n := len(delays)
	serverPerJob := "-"
	if serverPID != 0 {
		serverPerJob = (server / time.Duration(n)).Round(time.Microsecond).String()
	}
	return fmt.Sprintf("%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t", store, pending, perPoll.Round(100*time.Nanosecond), reqs, n, perJob,
		(cpu / time.Duration(n)).Round(time.Microsecond), serverPerJob,
		delays[n/2].Round(time.Millisecond), delays[n*99/100].Round(time.Millisecond), delays[n-1].Round(time.Millisecond)), nil
}

// writeAllocs writes the allocations profile into file.
func writeAllocs(file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// endedJobs is the runner's Metrics: it closes all once want jobs ended
// completed.
type endedJobs struct {
	want int64
	n    atomic.Int64
	all  chan struct{}
}

func (e *endedJobs) JobStarted(time.Duration, bool) {}

func (e *endedJobs) JobEnded(state string, _ uint64) {
	if state == string(jobs.Completed) && e.n.Add(1) == e.want {
		close(e.all)
	}
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
