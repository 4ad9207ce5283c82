package s3test

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"
)

// DelayProxy stands between clients and a [Server] as [Proxy] does, adding
// RTT to every request, but at the TCP level: each connection is a delay
// line, whose bytes from the client reach the server RTT after the proxy
// read them, in order, while the server's answers go back at once. A
// request (sent by the client in one go, as HTTP/1.1 clients do on a
// connection they do not share) therefore reaches the server RTT after it
// was sent, as through a Proxy, and a body streams behind its headers at
// the same delay: latency, not a bandwidth limit. It parses nothing and
// keeps no second pool of connections, so the process running it spends a
// fraction of a Proxy's CPU on each request (a test artefact: a client of
// AWS has no proxy on its cores); it does not count requests (count them
// at the client, [Counter.Wrap]). Start one with [NewDelayProxy].
type DelayProxy struct {
	rtt    time.Duration
	target *Server
	addr   string // the target's host:port
	ln     net.Listener
	url    string

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open client and server connections
	closed bool
	wg     sync.WaitGroup // the accept loop and the connections' goroutines
}

// NewDelayProxy starts a delaying proxy on a loopback port in front of
// target, adding rtt to every request (0: none).
func NewDelayProxy(target *Server, rtt time.Duration) (*DelayProxy, error) {
	u, err := url.Parse(target.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3test: delay proxy: target endpoint %q: %w", target.Endpoint, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("s3test: delay proxy: %w", err)
	}
	p := &DelayProxy{rtt: rtt, target: target, addr: u.Host, ln: ln, url: "http://" + ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Server returns the target with the proxy's endpoint: its clients go
// through the proxy. Its Name says the delay and that it is a DelayProxy
// ("versitygw +20ms tcp").
func (p *DelayProxy) Server() *Server {
	s := *p.target
	s.Endpoint = p.url
	if p.rtt > 0 {
		s.Name += fmt.Sprintf(" +%s tcp", p.rtt)
	}
	return &s
}

// RTT returns the delay added to every request.
func (p *DelayProxy) RTT() time.Duration { return p.rtt }

// Close stops accepting, closes every connection (requests in progress
// fail) and waits for the proxy's goroutines.
func (p *DelayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track adds c to the open connections, or closes it and reports false
// once the proxy is closed.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *DelayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *DelayProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// chunk is what one read from the client returned, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// serve connects client to a new connection to the target: the client's
// bytes go through a delay line, the target's come back as they come.
func (p *DelayProxy) serve(client net.Conn) {
	defer p.untrack(client)
	server, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
	if err != nil {
		return
	}
	if !p.track(server) {
		return
	}
	defer p.untrack(server)
	line := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Go(func() { // the client's bytes, timed
		defer close(line)
		buf := make([]byte, 64<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				line <- chunk{b: append([]byte(nil), buf[:n]...), at: time.Now()}
			}
			if err != nil {
				return
			}
		}
	})
	wg.Go(func() { // the delay line to the server
		for c := range line {
			if d := time.Until(c.at.Add(p.rtt)); d > 0 {
				time.Sleep(d)
			}
			if _, err := server.Write(c.b); err != nil {
				_ = client.Close() // the reader above stops
				for range line {
				}
				return
			}
		}
		if tc, ok := server.(*net.TCPConn); ok {
			_ = tc.CloseWrite() // the client is done sending
		}
	})
	_, _ = io.Copy(client, server) // the answers, at once (splice on Linux)
	_ = client.Close()
	wg.Wait()
}
