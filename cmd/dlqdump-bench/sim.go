package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/internal/s3sim"
	"github.com/dlqdump/dlqdump/segment"
)

// simRecords is how many records each simulated segment holds: a small
// segment, such as a quiet service flushes every FlushInterval.
const simRecords = 5

// simPoint is what one run of the simulation measured.
type simPoint struct {
	restorers, segments int
	took                time.Duration
	done                float64 // segments restored (records delivered / simRecords)
	steady              float64 // segments/s from a tenth of them to nine tenths; 0: not reached
	counts              map[string]int64
	slowdowns           int64
}

func (p *simPoint) rate() float64 { return p.done / p.took.Seconds() }

// benchSim runs fleets of restorers (default settings, one Owner) against a
// simulated S3 prefix (internal/s3sim: a round trip of o.rtt per request,
// S3's per-prefix request rates) holding small segments, and prints their
// segments/s beside the capacity model of docs/SCALING.md.
func benchSim(w io.Writer, o *options) error {
	counts, err := parseInts(o.simRestorers)
	if err != nil {
		return err
	}
	if o.simBlocks < 1 || o.simBlocks > simRecords {
		return fmt.Errorf("-sim-blocks %d: from 1 to %d", o.simBlocks, simRecords)
	}
	fmt.Fprintf(os.Stderr, "simulating a prefix %s away, %d segments of %d records in %d blocks per run, up to %s each\n", o.rtt, o.simSegments, simRecords, o.simBlocks, o.simFor)
	var points []simPoint
	for _, n := range counts {
		segs := o.simSegments
		if n == o.simFinalRestorers && o.simFinalSegments > 0 {
			segs = o.simFinalSegments
		}
		p, err := simRun(o, n, segs)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%d restorers: %.0f segments/s (%d segments in %s), %.2f requests per segment, %d SlowDowns\n",
			n, p.rate(), int(p.done), p.took.Round(time.Millisecond), float64(total(p.counts))/p.done, p.slowdowns)
		points = append(points, p)
	}
	simReport(w, o, points)
	return nil
}

// simRun seeds a prefix with segments and lets n restorers drain it, for at
// most o.simFor.
func simRun(o *options, n, segments int) (simPoint, error) {
	st := s3sim.New(s3sim.Options{RTT: o.rtt})
	if err := simSeed(st, segments, o.simBlocks); err != nil {
		return simPoint{}, err
	}
	var delivered atomic.Int64
	dst := nopQueue{&delivered}
	rs := make([]*dlqdump.Restorer, n)
	for i := range rs {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st, Decoder: decoder.Fallthrough{}, Queue: dst, Owner: "sim"})
		if err != nil {
			return simPoint{}, err
		}
		rs[i] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.simFor)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	// The steady rate: between a tenth and nine tenths of the segments, so
	// that neither the first listing nor the last segments' tail (fewer
	// left than restorers have in flight) count.
	var t10, t90 time.Duration
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			done := float64(delivered.Load()) / simRecords
			if el := time.Since(start); el/(30*time.Second) != (el-50*time.Millisecond)/(30*time.Second) {
				_, slow := st.Counts()
				fmt.Fprintf(os.Stderr, "  %s: %.0f segments restored, %.0f/s so far, %d SlowDowns\n", el.Round(time.Second), done, done/el.Seconds(), slow)
			}
			switch {
			case t10 == 0 && done >= 0.1*float64(segments):
				t10 = time.Since(start)
			case t90 == 0 && done >= 0.9*float64(segments):
				t90 = time.Since(start)
				return
			}
		}
	})
	for _, r := range rs {
		wg.Go(func() {
			for ctx.Err() == nil {
				rep, err := r.Run(ctx, dlqdump.RunOptions{})
				if err != nil && ctx.Err() == nil {
					fmt.Fprintln(os.Stderr, "sim: restore:", err)
				}
				if rep.Claimed == 0 && st.Ready() == 0 {
					return
				}
				if rep.Segments == 0 {
					t := time.NewTimer(20 * time.Millisecond) // held by the others: look again soon
					select {
					case <-t.C:
					case <-ctx.Done():
						t.Stop()
					}
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	cancel()
	sampler.Wait()
	for _, r := range rs {
		_ = r.Close()
	}
	counts, slow := st.Counts()
	p := simPoint{restorers: n, segments: segments, took: took, done: float64(delivered.Load()) / simRecords, counts: counts, slowdowns: slow}
	if t90 > 0 {
		p.steady = 0.8 * float64(segments) / (t90 - t10).Seconds()
	}
	return p, nil
}

// simSeed puts segments small segments of blocks blocks into st, oldest
// first.
func simSeed(st *s3sim.Store, segments, blocks int) error {
	base := time.Now().Add(-24 * time.Hour)
	type seg struct {
		name string
		data []byte
	}
	out := make([]seg, segments)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < segments; i += workers {
				created := base.Add(time.Duration(i) * time.Microsecond)
				id := segment.NewID(created)
				var buf bytes.Buffer
				sw, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, nil)
				for j := 0; err == nil && j < simRecords; j++ {
					err = sw.Add(created, nil, fmt.Appendf(nil, `{"order":%d,"line":%d,"error":"payment declined"}`, i, j))
					if per := simRecords / blocks; err == nil && (j+1)%per == 0 && (j+1)/per < blocks {
						err = sw.Flush() // ends a block
					}
				}
				if err == nil {
					err = sw.Close()
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				out[i] = seg{segment.FileName(created, id), buf.Bytes()}
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	for _, s := range out {
		st.Put(s.name, s.data)
	}
	return nil
}

// The request classes of S3's per-prefix rates.
func writesOf(c map[string]int64) int64 {
	return c["PutObject"] + c["CopyObject"] + c["DeleteObject"] + c["DeleteObjects"]
}

func total(c map[string]int64) int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// simTrips returns the round trips in a row a simulated segment of blocks
// blocks holds its place among a restorer's segments in flight: its claim,
// its GET and a checkpoint per block. Deleting it and its record (three
// more) overlap the next segment's.
func simTrips(blocks int) float64 { return float64(2 + blocks) }

// simReport prints each run beside the model: n restorers restore at most
// n × SegmentsInFlight / (simTrips × RTT) small segments per second (each
// segment in flight checkpoints its own blocks, so their round trips
// overlap), and a prefix at most WriteRate over the writes a segment takes.
func simReport(w io.Writer, o *options, points []simPoint) {
	fmt.Fprintf(w, "restorers\tsegments\tsegments/s\tsteady segments/s\tmodel\twrites/segment\treads/segment\tSlowDowns/segment\ttook\t\n")
	for _, p := range points {
		writes := float64(writesOf(p.counts)) / p.done
		reads := float64(total(p.counts)-writesOf(p.counts)) / p.done
		model := float64(p.restorers*dlqdump.DefaultSegmentsInFlight) / (simTrips(o.simBlocks) * o.rtt.Seconds())
		if prefix := s3sim.WriteRate / writes; prefix < model {
			model = prefix
		}
		steady := "-"
		if p.steady > 0 {
			steady = fmt.Sprintf("%.0f", p.steady)
		}
		fmt.Fprintf(w, "%d\t%d\t%.0f\t%s\t%.0f\t%.2f\t%.2f\t%.3f\t%s\t\n", p.restorers, int(p.done), p.rate(), steady, model, writes, reads,
			float64(p.slowdowns)/p.done, p.took.Round(time.Second))
	}
	fmt.Fprintf(w, "\ncommand: %s\t\n", strings.Join(os.Args, " "))
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bad number %q in %q", f, s)
		}
		out = append(out, n)
	}
	return out, nil
}
