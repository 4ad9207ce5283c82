package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
)

// fault is what the proxy does to a request.
type fault int

const (
	faultNone        fault = iota
	fault500               // 500 InternalError, not forwarded
	fault503               // 503 SlowDown, not forwarded
	faultResetBefore       // connection reset, not forwarded
	faultResetAfter        // forwarded, then the connection is reset: the request took effect but the client does not know
	faultDelay             // held longer than the client waits, then forwarded: the request takes effect late
	numFaults
)

var faultNames = [...]string{"none", "500", "503-slowdown", "reset-before", "reset-after", "delay"}

func (f fault) String() string { return faultNames[f] }

// proxy sits between a client and an S3 server. It forwards requests, fails
// a share of them, can add latency, and can be stopped (connections refused)
// and started again on the same address.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	tr     *http.Transport

	mu       sync.Mutex
	srv      *http.Server
	rate     float64 // share of requests that fail
	kinds    []fault // faults to choose from
	delay    time.Duration
	latency  time.Duration // added to every forwarded GET
	rng      *rand.Rand
	injected map[fault]int
	requests map[string]int // method -> forwarded requests

	inflightGets atomic.Int64
	maxGets      atomic.Int64
	bytesOut     atomic.Int64 // GET response bytes
	wg           sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{
		t:        t,
		target:   strings.TrimSuffix(target, "/"),
		tr:       &http.Transport{MaxIdleConnsPerHost: 64},
		rng:      rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42)),
		injected: map[fault]int{},
		requests: map[string]int{},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.stop()
		p.wg.Wait()
		p.tr.CloseIdleConnections()
	})
	return p
}

func (p *proxy) URL() string { return "http://" + p.addr }

func (p *proxy) serve(ln net.Listener) {
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = srv.Serve(ln)
	}()
}

// stop closes the listener and every connection: the server is down.
func (p *proxy) stop() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// start listens again on the same address, unless it serves already.
func (p *proxy) start() {
	p.mu.Lock()
	serving := p.srv != nil
	p.mu.Unlock()
	if serving {
		return
	}
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// closeUp closes q with the server up, started again if stopped: Close
// waits for the uploads, so a test failing while the server is down would
// wait for ever in a deferred Close (issue 30).
func (p *proxy) closeUp(q *dlqdump.Queue) {
	p.start()
	_ = q.Close()
}

// setFaults makes a share rate of the requests fail with one of kinds (all
// when none given); delay is how long faultDelay holds a request.
func (p *proxy) setFaults(rate float64, delay time.Duration, kinds ...fault) {
	if len(kinds) == 0 {
		for f := fault500; f < numFaults; f++ {
			kinds = append(kinds, f)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate, p.delay, p.kinds = rate, delay, kinds
}

func (p *proxy) setLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

func (p *proxy) injectedCount() map[fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[fault]int{}
	for k, v := range p.injected {
		m[k] = v
	}
	return m
}

func (p *proxy) requestCount(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[method]
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		reset(w)
		return
	}
	p.mu.Lock()
	f := faultNone
	if p.rate > 0 && p.rng.Float64() < p.rate {
		f = p.kinds[p.rng.IntN(len(p.kinds))]
		p.injected[f]++
	}
	delay, latency := p.delay, p.latency
	p.mu.Unlock()
	switch f {
	case fault500:
		s3Error(w, http.StatusInternalServerError, "InternalError", "injected fault")
	case fault503:
		s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case faultResetBefore:
		reset(w)
	case faultResetAfter:
		if resp, err := p.forward(context.Background(), r, body); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		reset(w)
	case faultDelay:
		time.Sleep(delay)
		resp, err := p.forward(context.WithoutCancel(r.Context()), r, body)
		if err != nil {
			reset(w)
			return
		}
		p.reply(w, resp)
	default:
		if r.Method == http.MethodGet {
			n := p.inflightGets.Add(1)
			defer p.inflightGets.Add(-1)
			for {
				m := p.maxGets.Load()
				if n <= m || p.maxGets.CompareAndSwap(m, n) {
					break
				}
			}
			if latency > 0 {
				time.Sleep(latency)
			}
		}
		resp, err := p.forward(r.Context(), r, body)
		if err != nil {
			s3Error(w, http.StatusBadGateway, "BadGateway", err.Error())
			return
		}
		p.reply(w, resp)
	}
}

func (p *proxy) forward(ctx context.Context, r *http.Request, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Connection", "Expect", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade", "Content-Length":
			continue
		}
		out.Header[k] = v
	}
	out.Host = r.Host // it is signed
	out.ContentLength = int64(len(body))
	resp, err := p.tr.RoundTrip(out)
	if err == nil {
		p.mu.Lock()
		p.requests[r.Method]++
		p.mu.Unlock()
	}
	return resp, err
}

func (p *proxy) reply(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	p.bytesOut.Add(n)
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>proxy</RequestId></Error>`, code, msg)
}

// reset closes the connection with a TCP RST.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("proxy: cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}
