package main

import (
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Issue 30, point 5: the smaller items.

// job ls --state with a state that does not exist says so and lists the
// states, not "invalid config".
func TestJobLsUnknownState(t *testing.T) {
	r := cli(t, exitUsage, "job", "ls", t.TempDir(), "--state", "bogus")
	want := `--state "bogus": no such job state; want one of pending, running, paused, completed, failed, cancelled`
	if !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "invalid config") {
		t.Errorf("want %q and not \"invalid config\"; %s", want, r)
	}
}

// Ctrl-C on dlqdump ui says that the console stops, not that a block or
// segment is being finished.
func TestUIInterruptSaysWhatStops(t *testing.T) {
	_, u := startUI(t, t.TempDir())
	stopUI(t, u)
	out := u.stderr()
	if !strings.Contains(out, "interrupted: stopping the console") || strings.Contains(out, "block or segment") {
		t.Errorf("dlqdump ui, interrupted, printed:\n%s", out)
	}
}

// A dry run of a restore says that finishing a segment released from
// quarantine deletes its damaged blocks with it.
func TestDryRunSaysReleasedDamagedBlocksGo(t *testing.T) {
	dir := t.TempDir()
	s := numbered("rd", 0x61, sink.AreaReady, 9, 200, nil)
	p := writeSegment(t, dir, s)
	flipBit(t, p, footer(t, p).Blocks[1].Offset+segment.BlockHeaderSize+3)
	tg := newTarget(t, nil)
	cli(t, exitUndelivered, "restore", dir, "--to", tg.URL)
	cli(t, 0, "quarantine", "release", dir, "--all")
	r := cli(t, 0, "restore", dir, "--to", tg.URL, "--dry-run")
	if !strings.Contains(r.stdout, "would finish     1 damaged block of segments released from quarantine") ||
		!strings.Contains(r.stdout, "--salvage") {
		t.Errorf("the dry run does not say that the damaged block goes with the segment; %s", r)
	}
	r = cli(t, 0, "restore", dir, "--to", tg.URL)
	if !strings.Contains(r.stderr, "finished 1 damaged block of segments released from quarantine") {
		t.Errorf("the restore does not say that the damaged block went; %s", r)
	}
}
