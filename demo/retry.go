package main

import (
	"container/heap"
	"sync"
	"sync/atomic"
	"time"
)

// retryScheduler holds tasks waiting for their backoff: a min-heap and one
// timer, as in seed 003's RetryManager.
type retryScheduler struct {
	due func(*entry)

	mu      sync.Mutex
	h       retryHeap
	seq     uint64
	stopped bool
	wake    chan struct{}
	quit    chan struct{}
	done    chan struct{}
	count   atomic.Int64
}

type retryEntry struct {
	at  time.Time
	seq uint64
	e   *entry
}

type retryHeap []retryEntry

func (h retryHeap) Len() int { return len(h) }
func (h retryHeap) Less(i, j int) bool {
	return h[i].at.Before(h[j].at) || h[i].at.Equal(h[j].at) && h[i].seq < h[j].seq
}
func (h retryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)   { *h = append(*h, x.(retryEntry)) }
func (h *retryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newRetryScheduler(due func(*entry)) *retryScheduler {
	r := &retryScheduler{due: due, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// schedule queues t for d from now. It returns false once stopped.
func (r *retryScheduler) schedule(e *entry, d time.Duration) bool {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return false
	}
	r.seq++
	heap.Push(&r.h, retryEntry{at: time.Now().Add(d), seq: r.seq, e: e})
	r.count.Add(1)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return true
}

func (r *retryScheduler) len() int { return int(r.count.Load()) }

func (r *retryScheduler) loop() {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		var next time.Duration = time.Hour
		var ready []*entry
		now := time.Now()
		for r.h.Len() > 0 {
			if e := r.h[0]; e.at.After(now) {
				next = e.at.Sub(now)
				break
			}
			ready = append(ready, heap.Pop(&r.h).(retryEntry).e)
		}
		r.mu.Unlock()
		for _, e := range ready {
			r.due(e)
			r.count.Add(-1)
		}
		if len(ready) > 0 {
			continue
		}
		timer.Reset(next)
		select {
		case <-r.quit:
			return
		case <-r.wake:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// stop ends the loop and returns the entries still waiting.
func (r *retryScheduler) stop() []*entry {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	close(r.quit)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*entry, 0, r.h.Len())
	for _, e := range r.h {
		out = append(out, e.e)
	}
	r.h = nil
	r.count.Store(0)
	return out
}
