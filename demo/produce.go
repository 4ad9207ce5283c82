package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// producer generates tasks at cfg.Rate per second while running.
type producer struct {
	s    *Scene
	idx  int
	stop chan struct{}
	done chan struct{}
}

func (p *producer) run() {
	defer close(p.done)
	const tick = 10 * time.Millisecond
	t := time.NewTicker(tick)
	defer t.Stop()
	perTick := p.s.cfg.Rate * tick.Seconds()
	var owed float64
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		owed += perTick
		for ; owed >= 1; owed-- {
			select {
			case <-p.stop:
				return
			default:
			}
			p.s.produce()
		}
	}
}

// produce creates and submits one generated task.
func (s *Scene) produce() {
	app := s.app
	n := app.seq.Add(1)
	t := newTask("auto-"+strconv.FormatUint(n, 10), genPayload(n, s.cfg.PayloadSize), s.cfg.MaxRetries)
	if err := app.store.add(t); err != nil {
		return
	}
	if err := s.submit(t, stQueued, ""); err != nil {
		app.store.remove(t)
		app.c.refused.Add(1)
		return
	}
	app.c.produced.Add(1)
}

const payloadAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// genPayload returns a JSON-looking order of about size bytes.
func genPayload(n uint64, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"order":%d,"customer":"c-%d","amount":%d.%02d,"note":"`, n, rand.IntN(10000), rand.IntN(500), rand.IntN(100))
	for b.Len() < size-2 {
		b.WriteByte(payloadAlphabet[rand.IntN(len(payloadAlphabet))])
	}
	b.WriteString(`"}`)
	return b.String()
}

// setProducers starts or stops producers until n run. It returns how many run.
func (s *Scene) setProducers(n int) (int, error) {
	s.prodMu.Lock()
	defer s.prodMu.Unlock()
	select {
	case <-s.stopped:
		return int(s.prodUp.Load()), errClosed
	default:
	}
	if n < 0 || n > len(s.producers) {
		return int(s.prodUp.Load()), fmt.Errorf("producers: %d is outside 0..%d", n, len(s.producers))
	}
	up := int(s.prodUp.Load())
	for ; up < n; up++ {
		p := s.producers[up]
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.run()
	}
	for ; up > n; up-- {
		p := s.producers[up-1]
		close(p.stop)
		<-p.done
	}
	s.prodUp.Store(int64(up))
	return up, nil
}

// addProducers changes the number of producers by delta, within limits.
func (s *Scene) addProducers(delta int) (int, error) {
	s.prodMu.Lock()
	n := int(s.prodUp.Load()) + delta
	s.prodMu.Unlock()
	if n < 0 {
		return int(s.prodUp.Load()), errors.New("no producer is running")
	}
	if n > len(s.producers) {
		return int(s.prodUp.Load()), fmt.Errorf("producers_max (%d) reached", len(s.producers))
	}
	return s.setProducers(n)
}
