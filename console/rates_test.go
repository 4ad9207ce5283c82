package console

import (
	"math"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/jobs"
)

// A job at 200 records/s writes 50 records' counts every 250 ms; the page,
// read every 1.5 s at another phase, shows 200/s, not the block more that
// a read just after a write sees (measured over the reads' times, its first
// rate was 230/s). A job that writes nothing for the window shows no rate; a
// job taken over by another runner starts a new measure.
func TestJobRateOverTheRunnersTimes(t *testing.T) {
	jr := newJobRates()
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	job := func(now time.Time, runner string) *jobs.Job {
		blocks := int(now.Sub(t0) / (250 * time.Millisecond))
		j := &jobs.Job{ID: "j", State: jobs.Running, Runner: runner, Delivered: uint64(50 * blocks)}
		if blocks > 0 {
			j.Progressed = t0.Add(time.Duration(blocks) * 250 * time.Millisecond)
		}
		return j
	}
	measured := 0
	for read := t0.Add(240 * time.Millisecond); read.Before(t0.Add(30 * time.Second)); read = read.Add(1520 * time.Millisecond) {
		rate := jr.observe(job(read, "A"), read)
		if rate == 0 {
			continue
		}
		measured++
		if math.Abs(rate-200) > 0.01 {
			t.Fatalf("read at %s: rate %.2f/s; want 200/s", read.Sub(t0), rate)
		}
	}
	if measured < 15 {
		t.Fatalf("a rate in %d reads of 20; want one from the second read on", measured)
	}
	// Stalled: the counts stop at 30 s.
	stalled := job(t0.Add(30*time.Second), "A")
	if rate := jr.observe(stalled, t0.Add(31*time.Second)); rate == 0 {
		t.Fatal("no rate a second after the last write")
	}
	if rate := jr.observe(stalled, t0.Add(30*time.Second+rateWindow+2*time.Second)); rate != 0 {
		t.Fatalf("rate %.1f/s for a job that wrote nothing for the window; want 0", rate)
	}
	// Taken over by B, whose counts go on from A's: a new measure.
	next := t0.Add(60 * time.Second)
	if rate := jr.observe(job(next, "B"), next); rate != 0 {
		t.Fatalf("rate %.1f/s at B's first write; want none until B's writes span a second", rate)
	}
}
