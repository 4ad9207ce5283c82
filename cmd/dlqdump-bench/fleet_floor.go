package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

// benchFleetFloor measures the least restoring small segments can cost on
// S3 at a round trip of -rtt, whatever the code: the requests no restorer
// keeping "a crash delivers at most one block twice per segment in flight"
// can do without, sent straight through the AWS client (through the same
// latency proxy as the fleet benchmark's, on the same versitygw) with no
// listing, decoding or delivery, by as many workers as -restorers restorers
// have segments in flight, delivering and finishing (2 ×
// SegmentsInFlight each). It prints the segments/s this ideal fleet gets and
// what its requests cost in CPU: the bound the fleet benchmark's small
// segments are under on this machine.
//
//	go run ./cmd/dlqdump-bench fleet-floor -segments 2000 -rtt 20ms
//
// A segment of -blocks blocks: create its claim (a write if absent), read
// it, a checkpoint per block (conditional), delete it, read its claim (a
// HEAD: a delete succeeds on a missing key) and delete it (conditional):
// 5 + blocks requests.
func benchFleetFloor(args []string) error {
	fl := flag.NewFlagSet("fleet-floor", flag.ExitOnError)
	n := fl.Int("segments", 2000, "small segments to restore")
	blocks := fl.Int("blocks", 2, "blocks per segment (the fleet benchmark's 4 KiB segments hold 2)")
	restorers := fl.Int("restorers", 4, "restorers whose segments in flight the workers stand for")
	rtt := fl.Duration("rtt", 20*time.Millisecond, "the round trip the proxy adds to every request (0: no proxy)")
	size := fl.Int("segment-size", 4096, "bytes of each segment")
	proxy := fl.String("proxy", "http", "what adds -rtt: http (s3test.Proxy) or tcp (s3test.DelayProxy)")
	_ = fl.Parse(args)
	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-bench"})
	if err != nil {
		return fmt.Errorf("fleet-floor needs versitygw: %w", err)
	}
	defer stop()
	target := srv
	switch {
	case *rtt > 0 && *proxy == "tcp":
		p, err := s3test.NewDelayProxy(srv, *rtt)
		if err != nil {
			return err
		}
		defer p.Close()
		target = p.Server()
	case *rtt > 0:
		p, err := s3test.NewProxy(srv, *rtt)
		if err != nil {
			return err
		}
		defer p.Close()
		target = p.Server()
	}
	prefix := s3test.UniquePrefix("fleet-floor") + "/"
	seg := func(i int) string { return prefix + "ready/" + strconv.Itoa(i) }
	rec := func(i int) string { return prefix + "records/" + strconv.Itoa(i) }
	setup := rawS3{c: srv.Client(), bucket: srv.Bucket}
	body := bytes.Repeat([]byte("x"), *size)
	if err := parallel(16, *n, func(i int) error {
		_, err := setup.put(seg(i), body, "", "")
		return err
	}); err != nil {
		return err
	}
	c := rawS3{c: target.Client(), bucket: target.Bucket}
	claim := []byte(`{"v":1,"owner":"floor","token":"t","lease_ms":30000}`)
	var requests atomic.Int64
	run := func(i int) error {
		v, err := c.put(rec(i), claim, "", "*")
		if err != nil {
			return err
		}
		if err := c.get(seg(i)); err != nil {
			return err
		}
		for b := range *blocks {
			cp := fmt.Appendf(nil, `{"v":1,"owner":"floor","token":"t","lease_ms":30000,"progress":{"offset":%d}}`, b+1)
			if v, err = c.put(rec(i), cp, v, ""); err != nil {
				return err
			}
		}
		if err := c.del(seg(i), ""); err != nil {
			return err
		}
		if err := c.head(rec(i)); err != nil {
			return err
		}
		if err := c.del(rec(i), v); err != nil {
			return err
		}
		requests.Add(int64(5 + *blocks))
		return nil
	}
	workers := *restorers * 2 * dlqdump.DefaultSegmentsInFlight
	cpu0, busy0 := processCPU(), machineBusy()
	start := time.Now()
	err = parallel(workers, *n, run)
	took := time.Since(start)
	if err != nil {
		return err
	}
	cpu, busy := processCPU()-cpu0, machineBusy()-busy0
	reqs := requests.Load()
	fmt.Printf("fleet-floor on %s: %d segments of %d blocks, %d at once (%d restorers × 2 × %d), %d requests each\n",
		target.Name, *n, *blocks, workers, *restorers, dlqdump.DefaultSegmentsInFlight, 5+*blocks)
	fmt.Printf("  %.0f segments/s (%d in %s)\n", float64(*n)/took.Seconds(), *n, took.Round(time.Millisecond))
	fmt.Printf("  CPU per request: this process (client and proxy) %s, machine %s (of which versitygw and the rest of the machine %s); machine busy %.0f%% of %s\n",
		(cpu / time.Duration(reqs)).Round(time.Microsecond), (busy / time.Duration(reqs)).Round(time.Microsecond),
		((busy - cpu) / time.Duration(reqs)).Round(time.Microsecond), 100*busy.Seconds()/(took.Seconds()*float64(runtime.NumCPU())), took.Round(time.Millisecond))
	return nil
}

// rawS3 sends single requests through an AWS client, for the floors.
type rawS3 struct {
	c      *awss3.Client
	bucket string
}

var floorCtx = context.Background()

// put writes key, if its ETag is ifMatch or, with ifNoneMatch "*", if it
// is absent, and returns the new ETag.
func (r rawS3) put(key string, body []byte, ifMatch, ifNoneMatch string) (string, error) {
	in := &awss3.PutObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	if ifNoneMatch != "" {
		in.IfNoneMatch = aws.String(ifNoneMatch)
	}
	out, err := r.c.PutObject(floorCtx, in)
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	return aws.ToString(out.ETag), nil
}

func (r rawS3) get(key string) error {
	out, err := r.c.GetObject(floorCtx, &awss3.GetObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("get %s: %w", key, err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(out.Body)
	return err
}

func (r rawS3) head(key string) error {
	if _, err := r.c.HeadObject(floorCtx, &awss3.HeadObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key)}); err != nil {
		return fmt.Errorf("head %s: %w", key, err)
	}
	return nil
}

func (r rawS3) del(key, ifMatch string) error {
	in := &awss3.DeleteObjectInput{Bucket: aws.String(r.bucket), Key: aws.String(key)}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	if _, err := r.c.DeleteObject(floorCtx, in); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}
