package main

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// producerFunc enqueues item i. Each producer goroutine gets its own from a
// newProducer function, so it may keep scratch buffers.
type producerFunc func(i int) error

// sustained enqueues items 0..n-1 from producers goroutines as fast as they
// go, stopping early once window has passed (0: no bound), then calls finish
// (close and publish everything). It returns the items enqueued and the time
// until finish returned.
func sustained(newProducer func() producerFunc, finish func() error, n int, window time.Duration, producers int) (int, time.Duration, error) {
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	start := time.Now()
	if window > 0 {
		t := time.AfterFunc(window, func() { stop.Store(true) })
		defer t.Stop()
	}
	for range producers {
		enqueue := newProducer()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := enqueue(int(i)); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					stop.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	done := int(min(next.Load(), int64(n)))
	err := finish()
	d := time.Since(start)
	if e := firstErr.Load(); e != nil {
		return done, d, *e
	}
	return done, d, err
}

// paced offers items at rate items/s for dur, from producers goroutines each
// taking an equal share on a fixed schedule (open loop: a producer behind
// schedule catches up without sleeping), and returns every enqueue's
// duration, sorted, and the rate achieved.
func paced(newProducer func() producerFunc, rate float64, producers int, dur time.Duration) ([]time.Duration, float64, error) {
	var wg sync.WaitGroup
	var firstErr atomic.Pointer[error]
	lats := make([][]time.Duration, producers)
	interval := time.Duration(float64(time.Second) * float64(producers) / rate) // per producer
	start := time.Now()
	for k := range producers {
		enqueue := newProducer()
		lat := make([]time.Duration, 0, int(dur.Seconds()*rate/float64(producers))+1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { lats[k] = lat }()
			phase := time.Duration(float64(interval) * float64(k) / float64(producers))
			for j := 0; ; j++ {
				due := phase + time.Duration(j)*interval
				if due >= dur || time.Since(start) > dur+dur/2 {
					return // done, or too far behind to catch up
				}
				if wait := due - time.Since(start); wait > 0 {
					time.Sleep(wait)
				}
				t0 := time.Now()
				if err := enqueue(j*producers + k); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				lat = append(lat, time.Since(t0))
				if firstErr.Load() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e := firstErr.Load(); e != nil {
		return nil, 0, *e
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return all, float64(len(all)) / elapsed.Seconds(), nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)]
}

func latPointOf(frac, target, achieved float64, lat []time.Duration) latPoint {
	return latPoint{Frac: frac, Target: target, Achieved: achieved, Count: len(lat),
		P50: percentile(lat, 0.5), P99: percentile(lat, 0.99), P999: percentile(lat, 0.999), Max: percentile(lat, 1)}
}
