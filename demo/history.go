package main

import (
	"context"
	"sync"
	"time"
)

// snapshot is the raw state the samples are computed from.
type snapshot struct {
	at                            time.Time
	produced, processed, failures uint64
	restored                      uint64 // counters.restored
	leaked                        [4]uint64
	totals                        sceneTotals
	qsize, qcap, producers, busy  int
	workers                       int
	pending                       int64
	ready, quarantinedSegs        int
	inFlight, dumpedTasks, lost   int64
	running                       bool
}

func (a *App) snapshot() snapshot {
	sn := snapshot{at: time.Now(), produced: a.c.produced.Load(), processed: a.c.processed.Load(), failures: a.c.failures.Load(), restored: a.c.restored.Load()}
	for i := range sn.leaked {
		sn.leaked[i] = a.c.leaked[i].Load()
	}
	sn.totals = a.totals()
	if s := a.current(); s != nil {
		sn.running = true
		sn.qsize, sn.qcap = s.q.Size(), s.q.Capacity()
		sn.producers = int(s.prodUp.Load())
		sn.busy = int(s.busy.Load())
		sn.workers = s.cfg.Workers
		if s.cfg.WorkersMax > s.cfg.Workers {
			sn.workers = s.cfg.WorkersMax
		}
		sn.pending = s.dump.Stats().Pending
	}
	sn.ready, sn.quarantinedSegs = a.segs.counts(context.Background())
	sn.inFlight = a.store.inFlight()
	sn.dumpedTasks = a.store.counts[stDumped].Load()
	sn.lost = a.store.counts[stFailed].Load()
	return sn
}

// sample is one point of the dashboard's charts.
type sample struct {
	T           int64   `json:"t"` // Unix milliseconds
	Running     bool    `json:"running"`
	QueueSize   int     `json:"queue_size"`
	QueueCap    int     `json:"queue_capacity"`
	Fill        float64 `json:"fill"`
	Producers   int     `json:"producers"`
	Workers     int     `json:"workers"`
	Busy        int     `json:"busy"`
	ProducedPS  float64 `json:"produced_ps"`
	ProcessedPS float64 `json:"processed_ps"`
	LeakedPS    float64 `json:"leaked_ps"`
	DumpedPS    float64 `json:"dumped_ps"`
	RestoredPS  float64 `json:"restored_ps"`
	QuarPS      float64 `json:"quarantined_ps"`
	FailuresPS  float64 `json:"failures_ps"`
	Pending     int64   `json:"pending_bytes"`
	Ready       int     `json:"segments_ready"`
	QuarSegs    int     `json:"segments_quarantined"`
	Published   uint64  `json:"segments_published"`
	Produced    uint64  `json:"produced"`
	Processed   uint64  `json:"processed"`
	Leaked      uint64  `json:"leaked"`
	Dumped      uint64  `json:"dumped"`
	Restored    uint64  `json:"restored"`
	Quarantined uint64  `json:"quarantined"`
	InFlight    int64   `json:"in_flight"`
	InDump      int64   `json:"in_dump"`
	Lost        int64   `json:"lost"`
}

func makeSample(p, c snapshot) sample {
	dt := c.at.Sub(p.at).Seconds()
	if dt <= 0 {
		dt = 1
	}
	rate := func(a, b uint64) float64 {
		if b < a {
			return 0
		}
		return float64(b-a) / dt
	}
	var pl, cl uint64
	for i := range c.leaked {
		pl += p.leaked[i]
		cl += c.leaked[i]
	}
	s := sample{
		T: c.at.UnixMilli(), Running: c.running, QueueSize: c.qsize, QueueCap: c.qcap,
		Producers: c.producers, Workers: c.workers, Busy: c.busy,
		ProducedPS: rate(p.produced, c.produced), ProcessedPS: rate(p.processed, c.processed),
		LeakedPS: rate(pl, cl), DumpedPS: rate(p.totals.Dumped, c.totals.Dumped),
		RestoredPS: rate(p.restored, c.restored), QuarPS: rate(p.totals.Quarantined, c.totals.Quarantined),
		FailuresPS: rate(p.failures, c.failures),
		Pending:    c.pending, Ready: c.ready, QuarSegs: c.quarantinedSegs, Published: c.totals.Segments,
		Produced: c.produced, Processed: c.processed, Leaked: cl, Dumped: c.totals.Dumped,
		Restored: c.totals.Restored, Quarantined: c.totals.Quarantined,
		InFlight: c.inFlight, InDump: c.dumpedTasks, Lost: c.lost,
	}
	if c.qcap > 0 {
		s.Fill = float64(c.qsize) / float64(c.qcap)
	}
	return s
}

// history is a ring of samples.
type history struct {
	mu  sync.Mutex
	buf []sample
	n   int
	pos int
}

func newHistory(n int) *history { return &history{buf: make([]sample, n)} }

func (h *history) add(s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf[h.pos] = s
	h.pos = (h.pos + 1) % len(h.buf)
	if h.n < len(h.buf) {
		h.n++
	}
}

func (h *history) all() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]sample, 0, h.n)
	start := (h.pos - h.n + len(h.buf)) % len(h.buf)
	for i := range h.n {
		out = append(out, h.buf[(start+i)%len(h.buf)])
	}
	return out
}

func (h *history) last() *sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return nil
	}
	s := h.buf[(h.pos-1+len(h.buf))%len(h.buf)]
	return &s
}
