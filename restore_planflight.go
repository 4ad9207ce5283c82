package dlqdump

import (
	"context"
	"sync"
	"sync/atomic"
)

// planFlights are the segments being read to plan them, so that Restorers
// planning one segment at once read it once (a jobs.Runner's Restorers
// start the jobs due at one second together, each planning the store in
// the same order).
type planFlights struct {
	mu sync.Mutex
	m  map[planKey]*planFlight
}

// planFlight is one read of a segment to plan it: p once done is closed.
type planFlight struct {
	done chan struct{}
	p    *planInfo
}

// planWaiting, when set (by tests), is called when a Restorer waits for
// another's read of a segment to plan it.
var planWaiting atomic.Pointer[func()]

// do returns what read returns for k, calling it unless a read of k is
// under way: then it waits for that one (or ctx: nil). first reports
// whether read was called.
func (fl *planFlights) do(ctx context.Context, k planKey, read func() *planInfo) (p *planInfo, first bool) {
	fl.mu.Lock()
	if f := fl.m[k]; f != nil {
		fl.mu.Unlock()
		if w := planWaiting.Load(); w != nil {
			(*w)()
		}
		select {
		case <-f.done:
			return f.p, false
		case <-ctx.Done():
			return nil, false
		}
	}
	if fl.m == nil {
		fl.m = map[planKey]*planFlight{}
	}
	f := &planFlight{done: make(chan struct{})}
	fl.m[k] = f
	fl.mu.Unlock()
	defer func() {
		fl.mu.Lock()
		delete(fl.m, k)
		fl.mu.Unlock()
		close(f.done)
	}()
	f.p = read()
	return f.p, true
}
