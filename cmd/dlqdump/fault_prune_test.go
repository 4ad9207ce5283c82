//go:build unix

package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// pruneScenario: a retention of one segment on the ready area, four
// segments: the three oldest go, the newest stays whatever happens; a
// segment the interrupted run removed is gone, one it did not is intact,
// and one still there after the run again is held by the interrupted run's
// claim (left alone, as a segment being restored is).
func pruneScenario(t *testing.T) *faultFixture {
	dir := t.TempDir()
	var specs []segSpec
	for i := range 4 {
		s := numbered("p", byte(0x31+i), sink.AreaReady, 6, 200, nil)
		writeSegment(t, dir, s)
		specs = append(specs, s)
	}
	orig := map[string][]byte{}
	for _, s := range specs {
		orig[s.name()], _ = os.ReadFile(segPath(dir, sink.AreaReady, s.name()))
	}
	newest := specs[len(specs)-1].name()
	args := []string{"prune", dir, "--area", "ready", "--max-segments", "1", "--lease", "1s"}
	each := func(t *testing.T, final bool) {
		for _, s := range specs {
			p := segPath(dir, sink.AreaReady, s.name())
			_, err := os.Stat(p)
			switch {
			case err != nil && s.name() == newest:
				t.Errorf("the newest segment %s was removed: the retention keeps one", s.name())
			case err != nil:
			case final && s.name() != newest && readRecordOf(t, dir, s.name()) == nil:
				t.Errorf("%s is due and unclaimed, yet still there after the run again", s.name())
			default:
				checkSameSegment(t, p, orig[s.name()])
			}
		}
	}
	return &faultFixture{
		args:        args,
		rerunCodes:  []int{0},
		dirs:        []string{dir},
		taker:       func(t *testing.T) { cli(t, -1, args...) },
		atInterrupt: func(t *testing.T) { each(t, false) },
		check:       func(t *testing.T) { each(t, true) },
	}
}

// pruneRaceScenario: the prune of pruneScenario with a restore as the
// competitor while prune is stopped (issue 30, defect (a)): a prune stopped
// between its fencing write and its delete, past its lease, must not delete
// a segment the restore took over and delivers; each record of the three
// oldest segments is delivered once or expired with its segment, never
// both, and the newest is delivered or left ready once.
func pruneRaceScenario(t *testing.T) *faultFixture {
	dir := t.TempDir()
	var specs []segSpec
	for i := range 4 {
		s := numbered(fmt.Sprintf("q%d", i), byte(0x41+i), sink.AreaReady, 6, 200, nil)
		writeSegment(t, dir, s)
		specs = append(specs, s)
	}
	universe := universeOf(t, dir, specs, nil)
	tg := newTarget(t, nil)
	args := []string{"prune", dir, "--area", "ready", "--max-segments", "1", "--lease", "1s"}
	return &faultFixture{
		args:       args,
		rerunCodes: []int{0},
		dirs:       []string{dir},
		taker:      func(t *testing.T) { cli(t, -1, "restore", dir, "--to", tg.URL, "--lease", "1s") },
		check: func(t *testing.T) {
			got, ready := tg.deliveredNow(), pending(t, dir, sink.AreaReady)
			for p := range universe {
				if got[p]+ready[p] > 1 {
					t.Errorf("record %q delivered %d times, ready %d times", p, got[p], ready[p])
				}
			}
			for _, r := range specs[len(specs)-1].records {
				if p := string(r.payload); got[p]+ready[p] != 1 {
					t.Errorf("record %q of the newest segment, which the retention keeps: delivered %d times, ready %d times", p, got[p], ready[p])
				}
			}
			for _, s := range specs {
				// A segment is whole: all of its records delivered,
				// none (expired, or left ready), never some.
				n := 0
				for _, r := range s.records {
					if got[string(r.payload)] > 0 {
						n++
					}
				}
				if n != 0 && n != len(s.records) {
					t.Errorf("segment %s: %d of its %d records delivered (the rest expired under the restore's claim?)", s.name(), n, len(s.records))
				}
			}
		},
	}
}
