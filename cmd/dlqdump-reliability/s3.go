package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	dlqs3 "github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// s3Faults dumps through a proxy that fails a share of S3 requests (500, 503
// SlowDown, connection resets, requests that outlast the client) and goes
// down completely for a while, then restores through the same proxy: no
// record may be lost, no segment stored twice.
//
// The server is the one named by DLQDUMP_S3_* or, without them, a versitygw
// started here (installed first under CI), as the tests do.
func s3Faults(o *options) []result {
	s3srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-reliability"})
	if errors.Is(err, s3test.ErrNoVersity) {
		return []result{{section: "s3 faults", figures: "not run: " + err.Error(), bound: "run", ok: os.Getenv("CI") == ""}}
	}
	if err != nil {
		return []result{{section: "s3 faults", figures: err.Error()}}
	}
	defer stop()
	bucket := s3srv.Bucket
	target, err := url.Parse(s3srv.Endpoint)
	if err != nil {
		return []result{{section: "s3 faults", figures: err.Error()}}
	}
	share := 0.2
	if o.short {
		share = 0.1
	}
	p := &faultProxy{rp: httputil.NewSingleHostReverseProxy(target), rng: rand.New(rand.NewPCG(41, 42)), share: share}
	srv := httptest.NewServer(p)
	defer srv.Close()
	faulty, direct := s3Client(s3srv, srv.URL), s3Client(s3srv, s3srv.Endpoint)
	prefix := fmt.Sprintf("reliability-%d/", time.Now().UnixNano())

	// Dump with faults and an outage in the middle.
	n := 20_000
	if o.short {
		n = 2_000
	}
	w := &dlqs3.Writer{Client: faulty, Bucket: bucket, Prefix: prefix}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 8 * dlqdump.Kilobyte, BlockSize: 2 * dlqdump.Kilobyte, FlushInterval: 50 * time.Millisecond, EnqueueTimeout: time.Minute})
	if err != nil {
		return []result{{section: "s3 faults", figures: err.Error()}}
	}
	var maxRate float32
	var maxBacklog int64
	dumpStart := time.Now()
	for i := range n {
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond) // spread the dump over seconds
		}
		if i == n/3 {
			p.down.Store(true)
			outageEnd := time.Now().Add(3 * time.Second)
			for time.Now().Before(outageEnd) { // keep dumping, slowly, while S3 is down
				time.Sleep(50 * time.Millisecond)
				maxRate = max(maxRate, q.Rate())
				maxBacklog = max(maxBacklog, w.Backlog())
			}
			p.down.Store(false)
		}
		if err := q.Enqueue(fmt.Sprintf("s3-%06d|%s", i, strings.Repeat("s", i%120))); err != nil {
			return []result{{section: "s3 faults", figures: fmt.Sprintf("Enqueue %d: %v", i, err)}}
		}
	}
	// The Queue owns the Writer: Close returns once every segment is
	// uploaded, and closes it.
	if err := q.Close(); err != nil {
		return []result{{section: "s3 faults", figures: "Queue.Close: " + err.Error()}}
	}
	published := q.Stats().Segments
	dumpTook := time.Since(dumpStart)
	// Read back directly, without faults.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rd := &dlqs3.Reader{Client: direct, Bucket: bucket, Prefix: prefix}
	seen := map[string]int{}
	objects := 0
	for si, err := range rd.List(ctx, sink.AreaReady) {
		if err != nil {
			return []result{{section: "s3 faults", figures: "list: " + err.Error()}}
		}
		objects++
		f, err := rd.Open(ctx, sink.AreaReady, si.Name)
		if err != nil {
			return []result{{section: "s3 faults", figures: "open: " + err.Error()}}
		}
		r, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
		if err != nil {
			f.Close()
			return []result{{section: "s3 faults", figures: "read: " + err.Error()}}
		}
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			id, _, _ := strings.Cut(string(rec.Payload), "|")
			seen[id]++
		}
		f.Close()
	}
	var lost, dups int
	for i := range n {
		if c := seen[fmt.Sprintf("s3-%06d", i)]; c == 0 {
			lost++
		} else {
			dups += c - 1
		}
	}
	rs := []result{{
		section: "s3 faults, dump",
		figures: fmt.Sprintf("%d records in %s, %d requests failed or delayed, %d refused during a 3s outage (backlog reached %s, Rate %.3f); %d segments published, %d objects stored; %d lost, %d stored twice",
			n, dumpTook.Round(time.Second), p.faults.Load(), p.outage.Load(), human(maxBacklog), maxRate, published, objects, lost, dups),
		bound: "0 lost, 0 twice, objects = segments published",
		ok:    lost == 0 && dups == 0 && uint64(objects) == published,
	}}

	// Restore through the faulty proxy.
	delivered := map[string]int{}
	var mu sync.Mutex
	dst := enqueueFunc(func(x any) error {
		id, _, _ := strings.Cut(x.(string), "|")
		mu.Lock()
		delivered[id]++
		mu.Unlock()
		return nil
	})
	rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer rcancel()
	restorer, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader: &dlqs3.Reader{Client: faulty, Bucket: bucket, Prefix: prefix, Logger: o.debugLogger()}, Decoder: decoder.Fallthrough{AsString: true},
		Queue: dst, Lease: 5 * time.Second, CheckpointInterval: 200 * time.Millisecond,
		Logger: o.logger(),
	})
	if err != nil {
		return append(rs, result{section: "s3 faults, restore", figures: err.Error()})
	}
	defer restorer.Close()
	restoreStart := time.Now()
	var passes int
	for passes = 1; passes <= 50; passes++ {
		passStart := time.Now()
		err := restorer.Restore(rctx) // errors are faults; the next pass retries
		if o.verbose {
			fmt.Fprintf(os.Stderr, "   restore pass %d: %s, %d delivered so far, error: %v\n", passes, time.Since(passStart).Round(time.Millisecond), restorer.Stats().Restored, err)
		}
		if rctx.Err() != nil {
			break
		}
		left := 0
		for _, err := range rd.List(rctx, sink.AreaReady) {
			left++ // a failed listing counts as not done
			if err != nil {
				break
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Whatever was not delivered must be accounted for: in quarantine, with
	// a reason.
	quarantined, reasons := 0, map[string]int{}
	for si, err := range rd.List(rctx, sink.AreaQuarantine) {
		if err != nil {
			break
		}
		quarantined++
		r := si.Reason
		if len(r) > 120 {
			r = r[:120]
		}
		reasons[r]++
	}
	if quarantined > 0 {
		fmt.Fprintf(os.Stderr, "   quarantined segments by reason: %v\n", reasons)
	}
	var rlost, rdups int
	for i := range n {
		if c := delivered[fmt.Sprintf("s3-%06d", i)]; c == 0 {
			rlost++
		} else {
			rdups += c - 1
		}
	}
	rs = append(rs, result{
		section: "s3 faults, restore",
		figures: fmt.Sprintf("%d records through the same faults in %d passes, %s: %d not delivered, %d delivered twice, %d segments quarantined", n, passes, time.Since(restoreStart).Round(time.Second), rlost, rdups, quarantined),
		bound:   "0 not delivered, 0 quarantined (faults are transient)",
		ok:      rlost == 0 && quarantined == 0,
		note:    "a delivery is repeated only when a checkpoint write failed before the segment was finished",
	})
	return rs
}

func (o *options) logger() *slog.Logger {
	if !o.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// debugLogger is logger at debug level: retried S3 calls too.
func (o *options) debugLogger() *slog.Logger {
	if !o.verbose {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func human(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}

// s3Client returns a client for srv through endpoint (srv's own or the
// faulty proxy's) whose requests time out after 2 seconds.
func s3Client(srv *s3test.Server, endpoint string) *awss3.Client {
	return srv.Client(func(o *awss3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	})
}

// faultProxy forwards to S3, failing a share of requests, or all of them while
// down.
type faultProxy struct {
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	rng    *rand.Rand
	share  float64
	down   atomic.Bool
	faults atomic.Int64
	outage atomic.Int64
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.down.Load() {
		p.outage.Add(1)
		reset(w)
		return
	}
	p.mu.Lock()
	fault := -1
	if p.rng.Float64() < p.share {
		fault = p.rng.IntN(4)
	}
	p.mu.Unlock()
	switch fault {
	case 0:
		p.faults.Add(1)
		http.Error(w, "internal error", http.StatusInternalServerError)
	case 1:
		p.faults.Add(1)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
	case 2:
		p.faults.Add(1)
		reset(w)
	case 3:
		// The request reaches the server after the client gave up.
		p.faults.Add(1)
		time.Sleep(2500 * time.Millisecond)
		p.rp.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	default:
		p.rp.ServeHTTP(w, r)
	}
}

func reset(w http.ResponseWriter) {
	if h, ok := w.(http.Hijacker); ok {
		if c, _, err := h.Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			return
		}
	}
	http.Error(w, "reset", http.StatusBadGateway)
}
