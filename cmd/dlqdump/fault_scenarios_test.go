//go:build unix

package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// faultFixture is one run of a scenario: a fresh dump, the command, and
// what must hold.
type faultFixture struct {
	args, env  []string
	rerunCodes []int  // exit statuses the run after the interruption may have
	rerunNote  string // exit status 1 is accepted too when stderr says this
	dirs       []string
	target     *target // the destination of a restore
	// atInterrupt checks the store right after the interruption.
	atInterrupt func(t *testing.T)
	// check checks the store after the command was run again.
	check func(t *testing.T)
	// taker, when set, runs while the command is stopped (SIGSTOP) past
	// its lease: a competitor (another restore) that takes the claims the
	// stopped command holds over; then the command goes on. Scenarios
	// without a taker hold no claims and are not stopped.
	taker func(t *testing.T)
	// stopCheck, when set, replaces check after a stop.
	stopCheck func(t *testing.T)
}

// faultScenario makes fixtures of one scenario; per is the size of the
// sample of fault points per kind (operations, deliveries) and signal.
type faultScenario struct {
	name  string
	per   int
	setup func(t *testing.T) *faultFixture
}

var faultScenarios = []faultScenario{
	{"restore", 5, restoreScenario},
	{"restore-filtered", 3, filteredScenario},
	{"cp-s3-to-dir", 4, cpScenario},
	{"mv", 5, mvScenario},
	{"mv-beside-a-restore", 4, mvRaceScenario},
	{"rewrap", 4, rewrapScenario},
	{"verify-salvage", 3, salvageScenario},
	{"quarantine-release", 3, releaseScenario},
	{"prune", 4, pruneScenario},
	{"prune-beside-a-restore", 3, pruneRaceScenario},
}

// TestFaultPoints runs each scenario's command, interrupted by SIGKILL and
// by SIGINT after each sink operation (or delivery) of a sample, and, where
// the command holds claims, stopped by SIGSTOP there past its lease while a
// competitor takes them over, then continued; it checks what must hold after
// the interruption, after a dry run and after the command is run again.
// DLQDUMP_FAULT_FULL=1 enumerates every point.
func TestFaultPoints(t *testing.T) {
	for _, sc := range faultScenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			fx := sc.setup(t)
			base := runChild(t, fx.env, fx.args, 0, "", nil)
			if !slices.Contains(fx.rerunCodes, base.code) {
				t.Fatalf("without faults; %s", base.result)
			}
			ops, deliveries := len(base.ops), 0
			if fx.target != nil {
				deliveries = fx.target.requestsNow()
			}
			points, held := 0, 0
			sigs := []string{"KILL", "INT"}
			if stopSupported && fx.taker != nil {
				sigs = append(sigs, "STOP")
			}
			for _, sig := range sigs {
				ks := faultPoints(ops, base.ops, sc.per)
				if sig == "STOP" {
					// Every point between a fencing write and the delete
					// or move it fences, sampled or not (issue 30).
					ks = union(ks, stallPoints(base.ops))
				}
				for _, k := range ks {
					points++
					if t.Run(fmt.Sprintf("%s-after-op-%d", sig, k), func(t *testing.T) { faultPoint(t, sc, sig, k, false) }) {
						held++
					}
				}
				for _, k := range faultPoints(deliveries, nil, sc.per) {
					points++
					if t.Run(fmt.Sprintf("%s-at-delivery-%d", sig, k), func(t *testing.T) { faultPoint(t, sc, sig, k, true) }) {
						held++
					}
				}
			}
			t.Logf("%s: %d sink operations and %d deliveries without faults; %d of %d fault points held", sc.name, ops, deliveries, held, points)
		})
	}
}

// faultPoint interrupts one run of a scenario at the k-th sink operation
// (or, with delivery, at the k-th request to the destination), checks, runs
// a dry run and the command again, and checks.
func faultPoint(t *testing.T, sc faultScenario, sig string, k int, delivery bool) {
	fx := sc.setup(t)
	var c childRun
	if delivery {
		var proc atomic.Pointer[os.Process]
		fx.target.setOnRequest(func(n int) {
			p := proc.Load()
			if n != k || p == nil {
				return
			}
			if sig == "KILL" {
				_ = p.Signal(syscall.SIGKILL)
			} else {
				_ = p.Signal(os.Interrupt)
			}
		})
		c = runChild(t, fx.env, fx.args, 0, sig, func(p *os.Process) { proc.Store(p) })
		fx.target.setOnRequest(nil)
	} else if sig == "STOP" {
		stopped := false
		c = runChild(t, fx.env, fx.args, k, sig, func(p *os.Process) {
			stopped = whenStopped(t, p, func() { fx.taker(t) })
		})
		if !stopped {
			t.Logf("not stopped: the run made fewer operations; %s", c.result)
		}
	} else {
		c = runChild(t, fx.env, fx.args, k, sig, nil)
	}
	if sig == "INT" && c.code != exitInterrupted && !slices.Contains(fx.rerunCodes, c.code) {
		t.Errorf("interrupted by SIGINT; %s", c.result)
	}
	if fx.atInterrupt != nil && sig != "STOP" {
		fx.atInterrupt(t)
	}
	for _, d := range fx.dirs {
		checkDryRun(t, d)
	}
	r := cliEnv(t, fx.env, -1, fx.args...)
	if !slices.Contains(fx.rerunCodes, r.code) && (r.code != exitError || fx.rerunNote == "" || !strings.Contains(r.stderr, fx.rerunNote)) {
		t.Errorf("run again after the interruption; %s", r)
	}
	for _, d := range fx.dirs {
		if tmp := tempFiles(t, d); len(tmp) > 0 {
			t.Errorf("temporary files left after the run again: %v", tmp)
		}
	}
	if sig == "STOP" && fx.stopCheck != nil {
		fx.stopCheck(t)
	} else {
		fx.check(t)
	}
	if t.Failed() {
		t.Logf("interrupted run (%d operations): %s\noperations: %s", len(c.ops), c.result, strings.Join(c.ops, "; "))
	}
}

// numbered returns a segment of n records, payloads "TAG-i-...", whose
// blocks hold a few records each (blockSize raw bytes).
func numbered(tag string, id byte, area sink.Area, n, blockSize int, headers func(i int) map[string]string) segSpec {
	s := segSpec{area: area, created: t0.Add(time.Duration(id) * time.Minute), id: id, version: segA.version, codec: segment.CodecZstd, blockSize: blockSize}
	for i := range n {
		var h map[string]string
		if headers != nil {
			h = headers(i)
		}
		s.records = append(s.records, rec{s.created.Add(time.Duration(i) * time.Second), h,
			[]byte(fmt.Sprintf("%s-%d-%s", tag, i, strings.Repeat("x", 60)))})
	}
	return s
}

// universeOf maps the intact records of segments to their blocks.
func universeOf(t *testing.T, dir string, specs []segSpec, keep func(p string) bool) map[string]string {
	u := map[string]string{}
	for _, s := range specs {
		for _, r := range readRecords(t, segPath(dir, s.area, s.name()), s.name()) {
			if keep == nil || keep(r.payload) {
				u[r.payload] = r.block
			}
		}
	}
	return u
}

// restoreScenario: a restore of three segments into an HTTP destination, one
// record refused (quarantined), one segment with a damaged block (its intact
// records delivered, then the segment quarantined with its progress).
func restoreScenario(t *testing.T) *faultFixture {
	dir := t.TempDir()
	r1 := numbered("r1", 0x11, sink.AreaReady, 9, 200, nil)
	r1.records[4].payload = []byte("refuse-" + string(r1.records[4].payload))
	r2 := numbered("r2", 0x12, sink.AreaReady, 6, 200, nil)
	r3 := numbered("r3", 0x13, sink.AreaReady, 3, 0, nil)
	specs := []segSpec{r1, r2, r3}
	for _, s := range specs {
		writeSegment(t, dir, s)
	}
	p2 := segPath(dir, sink.AreaReady, r2.name())
	flipBit(t, p2, footer(t, p2).Blocks[1].Offset+segment.BlockHeaderSize+3)
	universe := universeOf(t, dir, specs, nil)
	tg := newTarget(t, func(body string, _ int) int {
		if strings.HasPrefix(body, "refuse-") {
			return 400
		}
		return 200
	})
	args := []string{"restore", dir, "--to", tg.URL, "--max-attempts", "1", "--retry-base", "1ms", "--retry-max", "2ms", "--lease", "1s"}
	return &faultFixture{
		args:       args,
		rerunCodes: []int{0, exitUndelivered},
		dirs:       []string{dir},
		target:     tg,
		taker:      func(t *testing.T) { cli(t, -1, args...) },
		check: func(t *testing.T) {
			checkRestored(t, dir, universe, tg.deliveredNow())
			if n := areaNames(t, dir, sink.AreaReady); len(n) > 0 {
				t.Errorf("segments still ready after the run again: %v", n)
			}
		},
	}
}

// filteredScenario: a filtered restore (--where reason=a): the records of
// reason b stay ready, once, in a remainder segment.
func filteredScenario(t *testing.T) *faultFixture {
	dir := t.TempDir()
	reason := func(i int) map[string]string { return map[string]string{"reason": string(rune('a' + i%2))} }
	r4 := numbered("r4", 0x14, sink.AreaReady, 10, 200, reason)
	writeSegment(t, dir, r4)
	isA := func(p string) bool {
		var i int
		fmt.Sscanf(p, "r4-%d-", &i)
		return i%2 == 0
	}
	selected := universeOf(t, dir, []segSpec{r4}, isA)
	left := universeOf(t, dir, []segSpec{r4}, func(p string) bool { return !isA(p) })
	tg := newTarget(t, nil)
	args := []string{"restore", dir, "--to", tg.URL, "--where", "reason=a", "--lease", "1s"}
	return &faultFixture{
		args:       args,
		rerunCodes: []int{0},
		dirs:       []string{dir},
		target:     tg,
		taker:      func(t *testing.T) { cli(t, -1, args...) },
		check: func(t *testing.T) {
			got := tg.deliveredNow()
			checkRestored(t, dir, selected, got)
			ready := pending(t, dir, sink.AreaReady)
			for p := range left {
				if got[p] > 0 || ready[p] != 1 {
					t.Errorf("record %q, not selected: delivered %d times, ready %d times (want 0 and 1)", p, got[p], ready[p])
				}
			}
			for p := range selected {
				if ready[p] > 0 {
					t.Errorf("record %q, selected, is still ready after the run again", p)
				}
			}
		},
	}
}
