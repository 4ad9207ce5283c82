package main

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// registerMetrics registers the demo's own series on the App's private
// registry, beside dlqdump's (metrics/prometheus, queue label "demo").
func (a *App) registerMetrics() error {
	counter := func(name, help string, v *atomic.Uint64, labels prometheus.Labels) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v.Load()) })
	}
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	scene := func(f func(s *Scene) float64) func() float64 {
		return func() float64 {
			if s := a.current(); s != nil {
				return f(s)
			}
			return 0
		}
	}
	cs := []prometheus.Collector{
		counter("demo_tasks_produced_total", "Tasks accepted into the queue (producers and POST /enqueue).", &a.c.produced, nil),
		counter("demo_tasks_processed_total", "Tasks processed successfully.", &a.c.processed, nil),
		counter("demo_attempt_failures_total", "Processing attempts that failed.", &a.c.failures, nil),
		counter("demo_retries_total", "Retries scheduled with backoff.", &a.c.retries, nil),
		counter("demo_tasks_refused_total", "Tasks not accepted: the queue was closed or the dump refused the leak.", &a.c.refused, nil),
		counter("demo_tasks_lost_total", "Tasks the dump refused with no caller to tell: lost.", &a.c.dumpLost, nil),
		gauge("demo_queue_size", "Items in the koykov queue.", nil, scene(func(s *Scene) float64 { return float64(s.q.Size()) })),
		gauge("demo_queue_capacity", "Capacity of the koykov queue.", nil, scene(func(s *Scene) float64 { return float64(s.q.Capacity()) })),
		gauge("demo_producers", "Running producers.", nil, scene(func(s *Scene) float64 { return float64(s.prodUp.Load()) })),
		gauge("demo_workers_busy", "Workers processing a task.", nil, scene(func(s *Scene) float64 { return float64(s.busy.Load()) })),
		gauge("demo_retries_waiting", "Tasks waiting for their retry backoff.", nil, scene(func(s *Scene) float64 { return float64(s.retries.len()) })),
	}
	for i, r := range reasons {
		cs = append(cs, counter("demo_dead_letters_total", "Tasks handed to the dump, by reason.", &a.c.leaked[i], prometheus.Labels{"reason": r}))
	}
	for i := range numStates {
		st := state(i)
		cs = append(cs, gauge("demo_tasks", "Tasks remembered by the demo, by state.", prometheus.Labels{"state": st.String()},
			func() float64 { return float64(a.store.counts[st].Load()) }))
	}
	for _, c := range cs {
		if err := a.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// queueMetrics is the koykov queue's MetricsWriter: it counts what koykov
// saw (puts, pulls, leaks, deadline drops) and what it lost (an item that
// found neither room nor a DLQ: never, with the dump as DLQ).
type queueMetrics struct {
	puts, pulls, leaks atomic.Uint64
	deadline, lost     atomic.Uint64
}

func (m *queueMetrics) WorkerSetup(active, sleep, stop uint)       {}
func (m *queueMetrics) WorkerInit(uint32)                          {}
func (m *queueMetrics) WorkerSleep(uint32)                         {}
func (m *queueMetrics) WorkerWakeup(uint32)                        {}
func (m *queueMetrics) WorkerWait(uint32, time.Duration)           {}
func (m *queueMetrics) WorkerStop(_ uint32, _ bool, status string) {}
func (m *queueMetrics) QueuePut()                                  { m.puts.Add(1) }
func (m *queueMetrics) QueuePull()                                 { m.pulls.Add(1) }
func (m *queueMetrics) QueueRetry()                                {}
func (m *queueMetrics) QueueLeak(string)                           { m.leaks.Add(1) }
func (m *queueMetrics) QueueDeadline()                             { m.deadline.Add(1) }
func (m *queueMetrics) QueueLost()                                 { m.lost.Add(1) }
func (m *queueMetrics) SubqPut(string)                             {}
func (m *queueMetrics) SubqPull(string)                            {}
func (m *queueMetrics) SubqLeak(string)                            {}
