package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

// benchJobsFloor measures the least a restore job over one small segment
// can cost on S3, whatever the code: the requests no correct runner can do
// without, sent straight through the AWS client with no decoding, no
// delivery and no listing, by as many workers as seed 002's runners have
// Restorers. Jobs are due evenly over -span; each starts when a worker is
// free. It prints the start delay this ideal runner gets and what the
// requests cost in CPU, the bound that any real runner on this machine is
// under.
//
//	go run ./cmd/dlqdump-bench jobs-floor -jobs 10000 -span 60s -workers 16
//
// A job's requests: read its record, claim it (a conditional write that also
// says it runs), claim its segment (a write if absent), read the segment,
// checkpoint it (conditional), delete it, delete its claim (conditional),
// end the job (conditional), remove its due marker: 9.
func benchJobsFloor(args []string) error {
	fl := flag.NewFlagSet("jobs-floor", flag.ExitOnError)
	n := fl.Int("jobs", 10000, "jobs due over -span")
	span := fl.Duration("span", time.Minute, "the span the jobs are due over")
	workers := fl.Int("workers", 16, "jobs run at once (seed 002: 4 runners of 4 Restorers)")
	size := fl.Int("segment-size", 1024, "bytes of each job's segment")
	_ = fl.Parse(args)
	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-bench"})
	if err != nil {
		return fmt.Errorf("jobs-floor needs versitygw: %w", err)
	}
	defer stop()
	ctx := context.Background()
	c := srv.Client()
	prefix := s3test.UniquePrefix("jobs-floor") + "/"
	key := func(kind string, i int) string { return prefix + kind + "/" + strconv.Itoa(i) }
	put := func(k string, body []byte, ifMatch, ifNoneMatch string) (string, error) {
		in := &awss3.PutObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k), Body: bytes.NewReader(body)}
		if ifMatch != "" {
			in.IfMatch = aws.String(ifMatch)
		}
		if ifNoneMatch != "" {
			in.IfNoneMatch = aws.String(ifNoneMatch)
		}
		out, err := c.PutObject(ctx, in)
		if err != nil {
			return "", fmt.Errorf("put %s: %w", k, err)
		}
		return aws.ToString(out.ETag), nil
	}
	get := func(k string) ([]byte, string, error) {
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k)})
		if err != nil {
			return nil, "", fmt.Errorf("get %s: %w", k, err)
		}
		defer out.Body.Close()
		var b bytes.Buffer
		_, err = b.ReadFrom(out.Body)
		return b.Bytes(), aws.ToString(out.ETag), err
	}
	del := func(k, ifMatch string) error {
		in := &awss3.DeleteObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k)}
		if ifMatch != "" {
			in.IfMatch = aws.String(ifMatch)
		}
		if _, err := c.DeleteObject(ctx, in); err != nil {
			return fmt.Errorf("delete %s: %w", k, err)
		}
		return nil
	}
	// The store as the jobs' creation leaves it: a segment, a job record
	// and a due marker for each job.
	segment := bytes.Repeat([]byte("x"), *size)
	job := []byte(`{"v":1,"progress":{"id":"job","state":"pending","spec":{"segments":["s"]}}}`)
	if err := parallel(16, *n, func(i int) error {
		for _, w := range []struct {
			kind string
			body []byte
		}{{"seg", segment}, {"job", job}, {"due", []byte(`{}`)}} {
			if _, err := put(key(w.kind, i), w.body, "", ""); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	var requests atomic.Int64
	run := func(i int) error {
		_, v, err := get(key("job", i))
		if err != nil {
			return err
		}
		if v, err = put(key("job", i), bytes.Replace(job, []byte("pending"), []byte("running"), 1), v, ""); err != nil {
			return err
		}
		cv, err := put(key("claim", i), []byte(`{"owner":"w","token":"t"}`), "", "*")
		if err != nil {
			return err
		}
		if _, _, err := get(key("seg", i)); err != nil {
			return err
		}
		if cv, err = put(key("claim", i), []byte(`{"owner":"w","token":"t","progress":{"offset":1}}`), cv, ""); err != nil {
			return err
		}
		if err := del(key("seg", i), ""); err != nil {
			return err
		}
		if err := del(key("claim", i), cv); err != nil {
			return err
		}
		if _, err := put(key("job", i), bytes.Replace(job, []byte("pending"), []byte("completed"), 1), v, ""); err != nil {
			return err
		}
		if err := del(key("due", i), ""); err != nil {
			return err
		}
		requests.Add(9)
		return nil
	}
	// Jobs due evenly over the span, each taken by the first free worker.
	first := time.Now().Add(time.Second)
	due := func(i int) time.Time { return first.Add(*span * time.Duration(i) / time.Duration(*n)) }
	delays := make([]time.Duration, *n)
	next := make(chan int, *n)
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	cpu0, busy0 := processCPU(), machineBusy()
	for range *workers {
		wg.Go(func() {
			for i := range next {
				delays[i] = time.Since(due(i))
				if err := run(i); err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for i := range *n {
		time.Sleep(time.Until(due(i)))
		next <- i
	}
	close(next)
	wg.Wait()
	took := time.Since(first)
	if p := firstErr.Load(); p != nil {
		return *p
	}
	cpu, busy := processCPU()-cpu0, machineBusy()-busy0
	slices.Sort(delays)
	reqs := requests.Load()
	fmt.Printf("jobs-floor on %s: %d jobs due over %s, %d workers, 9 requests per job\n", srv.Name, *n, *span, *workers)
	fmt.Printf("  start delay p50 %s, p99 %s, max %s; all done %s after the first was due (%.0f jobs/s)\n",
		delays[*n/2].Round(time.Millisecond), delays[*n*99/100].Round(time.Millisecond), delays[*n-1].Round(time.Millisecond),
		took.Round(time.Millisecond), float64(*n)/took.Seconds())
	fmt.Printf("  CPU per request: client %s, machine %s (of which versitygw and the rest of the machine %s); machine busy %.0f%% of %s\n",
		(cpu / time.Duration(reqs)).Round(time.Microsecond), (busy / time.Duration(reqs)).Round(time.Microsecond),
		((busy - cpu) / time.Duration(reqs)).Round(time.Microsecond), 100*busy.Seconds()/(took.Seconds()*float64(runtime.NumCPU())), took.Round(time.Second))
	return nil
}

// parallel calls f(i) for i in [0, n), w at a time, and returns the first
// error.
func parallel(w, n int, f func(i int) error) error {
	next := make(chan int)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range w {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// machineBusy returns the CPU time the whole machine spent busy, from
// /proc/stat (zero elsewhere).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for j, s := range f[1:8] {
		if j == 3 || j == 4 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		busy += v
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}
