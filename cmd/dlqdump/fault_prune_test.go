//go:build unix

package main

import (
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
