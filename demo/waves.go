package main

import (
	"sync"
	"time"
)

// waveOptions shape the default scene's load: calm with Calm producers for
// CalmFor, then a burst of Burst producers for BurstFor, again and again.
type waveOptions struct {
	Calm, Burst       int
	CalmFor, BurstFor time.Duration
	changed           func(producers int) // called after each change (tests)
}

// waves alternates a scene's producers between calm and bursts, so that
// the queue overflows into the dump during each burst and the Restorer puts
// the dump back while it is calm. One goroutine (loop) owns the producer
// count until stop: the scene stops, or the producers are set by hand.
type waves struct {
	stopCh chan struct{}
	done   chan struct{}
	once   sync.Once
}

// startWaves starts the waves of s; App.stopWaves ends them.
func (a *App) startWaves(s *Scene, o waveOptions) {
	w := &waves{stopCh: make(chan struct{}), done: make(chan struct{})}
	a.mu.Lock()
	a.waves = w
	a.mu.Unlock()
	go w.loop(a, s, o)
}

// stopWaves ends the waves, if any, and waits for their goroutine; why is
// logged when they were running.
func (a *App) stopWaves(why string) {
	a.mu.Lock()
	w := a.waves
	a.waves = nil
	a.mu.Unlock()
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.stopCh) })
	<-w.done
	if why != "" {
		a.logf("waves stopped: %s", why)
	}
}

func (w *waves) loop(a *App, s *Scene, o waveOptions) {
	defer close(w.done)
	t := time.NewTimer(o.CalmFor)
	defer t.Stop()
	burst := false
	for {
		select {
		case <-w.stopCh:
			return
		case <-s.stopped:
			return
		case <-t.C:
		}
		burst = !burst
		n, d := o.Calm, o.CalmFor
		if burst {
			n, d = o.Burst, o.BurstFor
		}
		if _, err := s.setProducers(n); err != nil {
			return // the scene stopped
		}
		if burst {
			a.logf("burst: %d producers x %.0f/s for %s, more than the workers take: the queue overflows into the dump", n, s.cfg.Rate, d)
		} else {
			a.logf("calm: %d producers for %s: the Restorer puts the dump back while the queue has room", n, d)
		}
		if o.changed != nil {
			o.changed(n)
		}
		t.Reset(d)
	}
}
