//go:build unix

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// The fault scenarios of commands that publish on behalf of a claim (mv
// beside a restore, rewrap); see fault_scenarios_test.go. Stopped past their
// lease while a restore takes their claims over, they must never publish
// what they were writing: every record is delivered or published once.

// mvRaceScenario: mv of two ready segments into another directory, with a
// restore of the source as the competitor while mv is stopped.
func mvRaceScenario(t *testing.T) *faultFixture {
	src := t.TempDir()
	dst := filepath.Join(t.TempDir(), "dst")
	m1 := numbered("m1", 0x21, sink.AreaReady, 8, 200, nil)
	m2 := numbered("m2", 0x22, sink.AreaReady, 6, 200, nil)
	specs := []segSpec{m1, m2}
	for _, s := range specs {
		writeSegment(t, src, s)
	}
	universe := universeOf(t, src, specs, nil)
	tg := newTarget(t, nil)
	args := []string{"mv", src, dst, "--lease", "1s"}
	return &faultFixture{
		args:       args,
		rerunCodes: []int{0},
		dirs:       []string{src, dst},
		taker:      func(t *testing.T) { cli(t, -1, "restore", src, "--to", tg.URL, "--lease", "1s") },
		check: func(t *testing.T) {
			checkOnce(t, universe, tg.deliveredNow(), pending(t, dst, sink.AreaReady))
			if n := areaNames(t, src, sink.AreaReady); len(n) > 0 {
				t.Errorf("segments left in the source: %v", n)
			}
		},
	}
}

// rewrapScenario: rewrap of an encrypted dump of two segments for a new key,
// with a restore holding both keys as the competitor while rewrap is
// stopped.
func rewrapScenario(t *testing.T) *faultFixture {
	a, b := genIdentity(t), genIdentity(t)
	dir, items := encryptedDumpSized(t, 200, 4096, a.Recipient())
	ka, kb := keyFile(t, a), keyFile(t, b)
	universe := map[string]string{}
	for _, it := range items {
		universe[it] = "?"
	}
	tg := newTarget(t, nil)
	// Both identities, as after an interruption: what was rewrapped
	// already is read with the new key (and rewrapped again).
	args := []string{"rewrap", dir, "--identity", ka, "--identity", kb, "--recipient", b.Recipient().String(), "--lease", "1s"}
	return &faultFixture{
		args:       args,
		rerunCodes: []int{0},
		dirs:       []string{dir},
		taker: func(t *testing.T) {
			cli(t, -1, "restore", dir, "--to", tg.URL, "--identity", ka, "--identity", kb, "--lease", "1s")
		},
		check: func(t *testing.T) {
			// Every record is once in a segment readable with the new
			// key alone, or was delivered by the competitor.
			r := cli(t, -1, "cat", dir, "--identity", kb)
			if r.code != 0 {
				t.Errorf("cat with the new key only; %s", r)
			}
			ready := map[string]int{}
			for _, p := range payloads(t, r.stdout) {
				ready[p]++
			}
			checkOnce(t, universe, tg.deliveredNow(), ready)
		},
	}
}

// checkOnce checks that every record of universe was delivered, or is in
// place (ready), exactly once in all.
func checkOnce(t *testing.T, universe map[string]string, delivered, ready map[string]int) {
	t.Helper()
	var bad []string
	for p := range universe {
		if n := delivered[p] + ready[p]; n != 1 {
			bad = append(bad, fmt.Sprintf("%.30s: delivered %d, in place %d", p, delivered[p], ready[p]))
		}
	}
	if len(bad) > 0 {
		t.Errorf("%d records not exactly once: %s", len(bad), strings.Join(bad[:min(5, len(bad))], "; "))
	}
}
