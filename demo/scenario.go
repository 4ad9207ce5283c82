package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// phase is a part of a scripted scenario: a share of the duration with a
// number of producers.
type phase struct {
	name      string
	share     float64
	producers int
}

// ScenarioOptions describe a headless run.
type ScenarioOptions struct {
	Name           string        // "burst", "steady" or "restore"
	Duration       time.Duration // of the scripted load
	DrainTimeout   time.Duration // bound on draining after it
	BurstProducers int           // producers during the burst; default 4x the calm ones
}

func scenarioPhases(o ScenarioOptions, cfg SceneConfig) ([]phase, error) {
	calm := cfg.Producers
	if calm == 0 {
		calm = 1
	}
	switch o.Name {
	case "burst":
		burst := o.BurstProducers
		if burst == 0 {
			burst = 4 * calm
		}
		if burst > cfg.ProducersMax {
			return nil, fmt.Errorf("burst producers %d exceed producers_max %d", burst, cfg.ProducersMax)
		}
		return []phase{{"calm", 0.2, calm}, {"burst", 0.2, burst}, {"calm, restoring", 0.6, calm}}, nil
	case "steady":
		return []phase{{"steady", 1, calm}}, nil
	case "restore":
		// No load: the scene restores what the dump holds and drains.
		return nil, nil
	}
	return nil, fmt.Errorf("unknown scenario %q (want burst, steady or restore)", o.Name)
}

// Summary is what a scenario counted.
type Summary struct {
	Scenario    string
	Load, Drain time.Duration
	Drained     bool // everything left the queue and the dump before DrainTimeout
	Interrupted bool

	Produced, Processed, Leaked, Dumped, Restored, Quarantined uint64
	Found                                                      uint64 // records ready in the dump when the scenario began
	InDump                                                     uint64 // records found or dumped, not yet restored or quarantined
	Lost                                                       int64  // produced + found - processed - quarantined - in dump
	ByReason                                                   map[string]uint64
	Failures, Retries, Refused, Segments, DumpLost             uint64
	Tasks                                                      map[string]int64
	Ledger                                                     ledger // where every task ended, by state, after the stop
}

// OK reports whether nothing was lost, the task ledger adds up and every
// record found or dumped was restored or quarantined.
func (s *Summary) OK() bool {
	return s.Lost == 0 && s.Ledger.OK() && (s.Interrupted || s.Drained && s.Restored+s.Quarantined == s.Dumped+s.Found)
}

// RunScenario runs the scripted load on a new scene, drains it, stops it and
// returns the counts. Cancelling ctx ends the load early and skips draining.
func (a *App) RunScenario(ctx context.Context, o ScenarioOptions, cfg SceneConfig) (*Summary, error) {
	phases, err := scenarioPhases(o, cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case len(phases) == 0:
		cfg.Producers = 0
	case cfg.Producers == 0:
		cfg.Producers = phases[0].producers
	}
	// The records a run before this one left in the dump: the Restorer
	// restores them too, and the drain waits for them.
	found, err := a.sink.readyRecords(ctx)
	if err != nil {
		return nil, err
	}
	base := a.countersNow()
	s, err := a.StartScene(cfg)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Scenario: o.Name, Found: found}
	if len(phases) == 0 {
		a.logf("restoring the %d records the dump holds; no producers", found)
	}
	start := time.Now()
	for _, p := range phases {
		if ctx.Err() != nil {
			break
		}
		d := time.Duration(float64(o.Duration) * p.share)
		n, err := s.setProducers(p.producers)
		if err != nil {
			return nil, err
		}
		a.logf("phase %q: %d producers x %.0f tasks/s for %s", p.name, n, cfg.Rate, d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	sum.Load = time.Since(start)
	_, _ = s.setProducers(0)
	if ctx.Err() != nil {
		sum.Interrupted = true
		a.logf("interrupted: stopping without draining the dump")
	} else {
		a.logf("load done: producers stopped; draining (at most %s)", o.DrainTimeout)
		dstart := time.Now()
		sum.Drained = a.drain(ctx, s, found, o.DrainTimeout)
		sum.Drain = time.Since(dstart)
		if !sum.Drained {
			a.logf("drain did not finish within %s", o.DrainTimeout)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stopErr := a.StopScene(sctx, false)
	a.quar.scan(sctx)

	now := a.countersNow()
	sum.Produced = now.produced - base.produced
	sum.Processed = now.processed - base.processed
	sum.Failures = now.failures - base.failures
	sum.Retries = now.retries - base.retries
	sum.Refused = now.refused - base.refused
	sum.DumpLost = now.dumpLost - base.dumpLost
	sum.ByReason = map[string]uint64{}
	for i, r := range reasons {
		if n := now.leaked[i] - base.leaked[i]; n > 0 {
			sum.ByReason[r] = n
		}
		sum.Leaked += now.leaked[i] - base.leaked[i]
	}
	t := s.totals()
	sum.Dumped, sum.Restored, sum.Quarantined, sum.Segments = t.Dumped, t.Restored, t.Quarantined, t.Segments
	if sum.Dumped+sum.Found > sum.Restored+sum.Quarantined {
		sum.InDump = sum.Dumped + sum.Found - sum.Restored - sum.Quarantined
	}
	sum.Lost = int64(sum.Produced+sum.Found) - int64(sum.Processed) - int64(sum.Quarantined) - int64(sum.InDump)
	sum.Tasks = a.store.stateCounts()
	sum.Ledger = a.ledger()
	return sum, stopErr
}

// drain waits until nothing is queued, running, waiting for a retry or in
// the dump (found: the records the dump held when the scene started),
// flushing the dump so that the Restorer sees its last records. It reports
// whether that happened within timeout.
func (a *App) drain(ctx context.Context, s *Scene, found uint64, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastFlush time.Time
	calm := 0
	for {
		t := s.totals()
		a.quar.catchUp(ctx, a.totals().Quarantined)
		inDump := t.Dumped+found != t.Restored+t.Quarantined
		settled := s.idle() && !inDump && a.store.inFlight() == 0 && a.store.counts[stDumped].Load() == 0
		if settled {
			if calm++; calm >= 3 {
				return true
			}
		} else {
			calm = 0
		}
		if inDump && s.idle() && time.Since(lastFlush) > 250*time.Millisecond {
			// Publish what the dump holds in memory now instead of
			// waiting for FlushInterval.
			fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
			_ = s.dump.Flush(fctx)
			fcancel()
			lastFlush = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// counterValues is a copy of the App's counters.
type counterValues struct {
	produced, processed, failures, retries, refused, dumpLost uint64
	leaked                                                    [4]uint64
}

func (a *App) countersNow() counterValues {
	v := counterValues{produced: a.c.produced.Load(), processed: a.c.processed.Load(), failures: a.c.failures.Load(),
		retries: a.c.retries.Load(), refused: a.c.refused.Load(), dumpLost: a.c.dumpLost.Load()}
	for i := range v.leaked {
		v.leaked[i] = a.c.leaked[i].Load()
	}
	return v
}

// Print writes the summary table.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\nscenario %s: load %s, drain %s", s.Scenario, s.Load.Round(time.Millisecond), s.Drain.Round(time.Millisecond))
	switch {
	case s.Interrupted:
		fmt.Fprint(w, " (interrupted, not drained)")
	case !s.Drained:
		fmt.Fprint(w, " (NOT drained: timed out)")
	}
	fmt.Fprintln(w)
	var rs []string
	for _, r := range reasons {
		if n := s.ByReason[r]; n > 0 {
			rs = append(rs, fmt.Sprintf("%s %d", r, n))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, v any, note string) { fmt.Fprintf(tw, "%s\t%v\t  %s\n", name, v, note) }
	fmt.Fprintln(tw, "\tcount\t")
	if s.Found > 0 {
		row("found", s.Found, "records in the dump at the start, left by an earlier run")
	}
	row("produced", s.Produced, "tasks accepted into the queue")
	row("processed", s.Processed, "tasks done")
	row("leaked", s.Leaked, "handed to the dump: "+strings.Join(rs, ", "))
	row("dumped", s.Dumped, fmt.Sprintf("records accepted by the dumper, in %d segments", s.Segments))
	row("restored", s.Restored, "records put back into the queue")
	row("quarantined", s.Quarantined, "records moved aside by the Restorer")
	if s.InDump > 0 || s.Interrupted {
		row("in dump", s.InDump, "records still waiting to be restored")
	}
	found := map[bool]string{true: " + found", false: ""}[s.Found > 0]
	row("lost", s.Lost, "produced"+found+" - processed - quarantined"+map[bool]string{true: " - in dump", false: ""}[s.InDump > 0 || s.Interrupted])
	_ = tw.Flush()
	fmt.Fprintf(w, "(attempts failed %d, retries %d, refused %d, dump refusals %d)\n", s.Failures, s.Retries, s.Refused, s.DumpLost)
	s.Ledger.printCounts(w)
	check := "restored + quarantined = dumped" + found
	if s.Restored+s.Quarantined != s.Dumped+s.Found {
		check = fmt.Sprintf("restored + quarantined = %d, dumped%s = %d", s.Restored+s.Quarantined, found, s.Dumped+s.Found)
	}
	if err := s.Ledger.check(); err != nil {
		check += "; " + err.Error()
	}
	verdict := "OK"
	if !s.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "%s: lost = %d; %s\n", verdict, s.Lost, check)
}
