//go:build unix

package main

import (
	"strings"
	"testing"
)

// TestRestoreKilledAfterSideSegment kills a restore right after it
// published a side segment (the quarantine segment of a refused record),
// before its progress says so, and runs it again: the run again writes that
// side segment again, finds it published (sink.ErrExist) and goes on, and
// must not leave the temporary file of its second copy (".NAME.dlq.part" in
// the quarantine directory) behind. Found by the fault points: the
// Restorer's writeSide did not Abort on that path (fixed in b31d709).
func TestRestoreKilledAfterSideSegment(t *testing.T) {
	fx := restoreScenario(t)
	base := runChild(t, fx.env, fx.args, 0, "", nil)
	at := 0
	for i, op := range base.ops {
		if f := strings.Fields(op); len(f) >= 2 && f[1] == "commit" {
			at = i + 1
			break
		}
	}
	if at == 0 {
		t.Fatalf("no side segment committed; operations: %v", base.ops)
	}
	fx = restoreScenario(t)
	c := runChild(t, fx.env, fx.args, at, "KILL", nil)
	if !c.killed {
		t.Fatalf("not killed at operation %d; %s", at, c.result)
	}
	cliEnv(t, fx.env, -1, fx.args...)
	for _, d := range fx.dirs {
		if tmp := tempFiles(t, d); len(tmp) > 0 {
			t.Errorf("restore killed after publishing a side segment (%s), then run again: temporary files left: %v", c.ops[len(c.ops)-1], tmp)
		}
	}
	fx.check(t)
}
