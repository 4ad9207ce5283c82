package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The burst scenario, shortened: a burst overflows the queue, the dump takes
// what leaks, the Restorer brings it all back, and nothing is lost.
func TestBurstScenario(t *testing.T) {
	cfg := defaultSceneConfig()
	cfg.Capacity = 100
	cfg.Workers = 4
	cfg.WorkerDelay = duration(time.Millisecond)
	cfg.FailRate = 0.1
	cfg.MaxRetries = 1
	cfg.BackoffBase = duration(time.Millisecond)
	cfg.BackoffMax = duration(20 * time.Millisecond)
	cfg.Deadline = duration(100 * time.Millisecond)
	cfg.Producers = 1
	cfg.ProducersMax = 16
	cfg.Rate = 300
	cfg.PayloadSize = 120
	cfg.SegmentSize = byteSize(64 << 10)
	cfg.Flush = duration(200 * time.Millisecond)
	cfg.RestoreInterval = duration(100 * time.Millisecond)
	cfg.Postpone = duration(5 * time.Millisecond)
	cfg.MaxReplays = 3

	app, out := newTestApp(t, nil, func(o *AppOptions) { o.LogEvery = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	sum, err := app.RunScenario(ctx, ScenarioOptions{Name: "burst", Duration: 3 * time.Second, DrainTimeout: 30 * time.Second, BurstProducers: 12}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	sum.Print(&table)
	t.Logf("output:\n%s%s", out.String(), table.String())

	if !sum.Drained {
		t.Errorf("not drained within the timeout (%s)", sum.Drain)
	}
	if sum.Lost != 0 {
		t.Errorf("lost = %d, want 0", sum.Lost)
	}
	if sum.Restored+sum.Quarantined != sum.Dumped {
		t.Errorf("restored %d + quarantined %d != dumped %d", sum.Restored, sum.Quarantined, sum.Dumped)
	}
	if sum.ByReason[reasonLeak] == 0 {
		t.Errorf("the burst did not overflow the queue: leaked by reason %v", sum.ByReason)
	}
	if sum.Leaked != sum.Dumped {
		t.Errorf("leaked %d, dumped %d: every dead letter should reach the dump", sum.Leaked, sum.Dumped)
	}
	if sum.Segments == 0 || sum.Produced == 0 || sum.Processed == 0 {
		t.Errorf("segments %d produced %d processed %d", sum.Segments, sum.Produced, sum.Processed)
	}
	if sum.DumpLost != 0 || sum.Tasks["failed"] != 0 {
		t.Errorf("tasks lost: dump refusals %d, failed tasks %d", sum.DumpLost, sum.Tasks["failed"])
	}
	if n := sum.Tasks["queued"] + sum.Tasks["running"] + sum.Tasks["restored"] + sum.Tasks["dumped"]; n != 0 {
		t.Errorf("%d tasks still in flight after draining: %v", n, sum.Tasks)
	}
	if q := sum.Tasks["quarantined"]; uint64(q) != sum.Quarantined {
		t.Errorf("%d tasks marked quarantined, the Restorer quarantined %d records", q, sum.Quarantined)
	}
	if !sum.OK() {
		t.Error("summary not OK")
	}
	if !strings.Contains(table.String(), "OK: lost = 0") {
		t.Errorf("summary table:\n%s", table.String())
	}
}

// run is the command: a short scenario through the flags exits 0 and prints
// the summary and where the segments are.
func TestRunScenarioCommand(t *testing.T) {
	var stdout, stderr syncBuffer
	args := []string{
		"-scenario", "steady", "-duration", "500ms", "-drain-timeout", "20s", "-dir", t.TempDir(),
		"-capacity", "50", "-workers", "2", "-worker-delay", "1ms", "-producers", "1", "-rate", "200",
		"-flush", "100ms", "-restore-interval", "50ms", "-log-every", "0",
	}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"scenario steady", "produced", "lost", "OK: lost = 0", "segments are in"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if code := run([]string{"-scenario", "nope", "-dir", t.TempDir(), "-log-every", "0"}, &stdout, &stderr); code == 0 {
		t.Error("an unknown scenario exits 0")
	}
	if code := run([]string{"-capacity", "0"}, &stdout, &stderr); code != 2 {
		t.Errorf("a bad flag value: exit %d, want 2", code)
	}
}
