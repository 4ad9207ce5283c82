package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// TestQuarantinePartlyDelivered is the command's side of issue 12 defect 5:
// a damaged segment's intact records are delivered, then the segment is
// moved to quarantine whole. quarantine ls, ls and cat must not show the
// delivered records as if they were not, and quarantine release followed by
// a restore must not deliver them again.
func TestQuarantinePartlyDelivered(t *testing.T) {
	dir := makeSample(t)
	pathA := segPath(dir, sink.AreaReady, segA.name())
	blk := footer(t, pathA).Blocks[2]
	flipBit(t, pathA, blk.Offset+segment.BlockHeaderSize+3)
	intact := 12 - int(blk.Count)
	tg := newTarget(t, nil)
	cli(t, exitUndelivered, "restore", dir, segA.name(), "--to", tg.URL)
	if n := len(tg.deliveredNow()); n != intact {
		t.Fatalf("delivered %d of A's records, want its %d intact ones", n, intact)
	}

	r := cli(t, 0, "quarantine", "ls", dir, "--json")
	var got quarantineJSON
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var j quarantineJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if j.Name == segA.name() {
			got = j
		}
	}
	if got.Records != 0 || got.Claim == nil || got.Claim.Delivered != uint64(intact) || got.Claim.State != "quarantined" {
		t.Errorf("quarantine ls --json of A: records %d, claim %+v; want 0 records, %d delivered, state quarantined; %s", got.Records, got.Claim, intact, r)
	}
	r = cli(t, 0, "quarantine", "ls", dir)
	if !strings.Contains(r.stdout, fmt.Sprintf("(%d delivered before it was quarantined) ", intact)) {
		t.Errorf("quarantine ls of A: %s", r)
	}
	if r := cli(t, 0, "ls", dir, segA.name()); !strings.Contains(r.stdout, "quarantined by dlqdump-cli@") || !strings.Contains(r.stdout, fmt.Sprintf("%d delivered", intact)) {
		t.Errorf("ls of A: %s", r)
	}
	if r := cli(t, 0, "cat", dir, segA.name()); r.stdout != "" {
		t.Errorf("cat of A prints records delivered already: %s", r)
	}

	// Released and restored again: nothing is delivered twice.
	cli(t, 0, "quarantine", "release", dir, segA.name())
	if r := cli(t, 0, "ls", dir, segA.name()); !strings.Contains(r.stdout, "released from quarantine; quarantined by dlqdump-cli@") {
		t.Errorf("ls of A released: %s", r)
	}
	// Nothing was left of it: the restore finishes it (issue 20, defect 6:
	// it was quarantined again, exit 4, "some records were not delivered").
	cli(t, 0, "restore", dir, segA.name(), "--to", tg.URL)
	for p, n := range tg.deliveredNow() {
		if n != 1 {
			t.Errorf("%s delivered %d times", p, n)
		}
	}
	if r := cli(t, 0, "ls", dir, "--json"); strings.Contains(r.stdout, segA.name()) {
		t.Errorf("A is still there after its release and a restore: %s", r)
	}
}

// TestReleaseNeverReplaces releases a quarantined segment whose name a
// ready segment has (with other bytes): both stay as they are, and the
// error names both.
func TestReleaseNeverReplaces(t *testing.T) {
	dir := makeSample(t)
	other := segD
	other.area = sink.AreaReady
	other.reason = ""
	other.records = other.records[:1]
	writeSegment(t, dir, other)
	before := tree(t, dir)
	r := cli(t, exitError, "quarantine", "release", dir, "--all")
	q, rd := segPath(dir, sink.AreaQuarantine, segD.name()), segPath(dir, sink.AreaReady, segD.name())
	if !strings.Contains(r.stderr, "release "+q+": "+rd+" is in the way") || !strings.Contains(r.stderr, "not replaced") {
		t.Errorf("release over a ready segment: %s", r)
	}
	if d := treeDiff(before, tree(t, dir)); d != "" {
		t.Errorf("a refused release changed the dump: %s", d)
	}
}
