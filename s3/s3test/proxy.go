package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/internal/s3op"
)

// Proxy stands between clients and a [Server] as a distant S3 would: every
// request waits RTT before it is forwarded, the round trip of a server
// across a network (20 ms is typical of AWS from a nearby region; a
// loopback server answers in a fraction of a millisecond), and is counted
// under its S3 operation. Bodies stream through it unbounded: it adds
// latency, not a bandwidth limit. Start one with [NewProxy]; give clients
// (or child processes, as JSON) the Server that [Proxy.Server] returns.
type Proxy struct {
	rtt    time.Duration
	target *Server
	srv    *http.Server
	url    string
	tr     *http.Transport
	wg     sync.WaitGroup

	counter Counter // the requests forwarded
}

// NewProxy starts a proxy on a loopback port in front of target, adding rtt
// to every request (0: none, to count requests only).
func NewProxy(target *Server, rtt time.Duration) (*Proxy, error) {
	u, err := url.Parse(target.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3test: proxy: target endpoint %q: %w", target.Endpoint, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("s3test: proxy: %w", err)
	}
	p := &Proxy{rtt: rtt, target: target, url: "http://" + ln.Addr().String(),
		tr: &http.Transport{MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute, DisableCompression: true}}
	rp := &httputil.ReverseProxy{
		// The Host header stays the proxy's: it is signed.
		Director: func(r *http.Request) {
			r.URL.Scheme, r.URL.Host = u.Scheme, u.Host
		},
		Transport:     p,
		FlushInterval: -1,
		ErrorLog:      nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// RoundTrip waits RTT (or until the request is cancelled), counts the
// request and forwards it.
func (p *Proxy) RoundTrip(r *http.Request) (*http.Response, error) {
	op := s3op.Of(r)
	if p.rtt > 0 {
		t := time.NewTimer(p.rtt)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	p.counter.add(op)
	return p.tr.RoundTrip(r)
}

// RTT returns the delay added to every request.
func (p *Proxy) RTT() time.Duration { return p.rtt }

// Server returns the target with the proxy's endpoint: its clients go
// through the proxy.
func (p *Proxy) Server() *Server {
	s := *p.target
	s.Endpoint = p.url
	s.Name = p.target.Name
	if p.rtt > 0 {
		s.Name += fmt.Sprintf(" +%s", p.rtt)
	}
	return &s
}

// Counts returns the requests forwarded so far by operation (see
// Counter.Counts).
func (p *Proxy) Counts() Counts { return p.counter.Counts() }

// Reset sets the counts to zero.
func (p *Proxy) Reset() { p.counter.Reset() }

// Close stops the proxy and waits for the requests in progress.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	p.wg.Wait()
	p.tr.CloseIdleConnections()
	return err
}
