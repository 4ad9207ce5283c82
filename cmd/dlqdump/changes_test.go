package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// logEntries returns the change log of dir as dlqdump log --json prints it,
// oldest first.
func logEntries(t *testing.T, dir string) []changelog.Entry {
	t.Helper()
	r := cli(t, 0, "log", dir, "--json", "--oldest-first", "--limit", "0")
	var out []changelog.Entry
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var e changelog.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// TestChangeLog: each command that changes a store appends an entry with
// who, what, scope and why; log prints them and --verify checks the chain,
// naming the first entry changed behind its back.
func TestChangeLog(t *testing.T) {
	dir := makeSample(t)
	host, _ := os.Hostname()
	if r := cli(t, 0, "log", dir); !strings.Contains(r.stderr, "no entries") {
		t.Fatalf("log of a store without changes: %s", r)
	}
	cli(t, 0, "job", "create", dir, "--id", "redrive-1", "--where", "reason=failed", "--at", "2030-01-01T00:00:00Z", "--actor", "alice", "--reason", "INC-42")
	cli(t, 0, "job", "pause", dir, "redrive-1", "--wait", "0")
	cli(t, 0, "quarantine", "release", dir, segD.name(), "--reason", "version 0.9 is accepted again")
	cli(t, 0, "prune", dir, "--area", "archive", "--select", "time < 2030-01-01", "--actor", "bob")
	es := logEntries(t, dir)
	want := []struct{ action, actor, scope, reason string }{
		{changelog.ActionJobCreate, "alice", "job redrive-1", "INC-42"},
		{changelog.ActionJobPause, "@" + host, "job redrive-1", ""},
		{changelog.ActionRelease, "@" + host, "quarantined segments " + segD.name(), "version 0.9 is accepted again"},
		{changelog.ActionPrune, "bob", "area archive, select time < 2030-01-01T00:00:00Z", ""},
	}
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(es), len(want), es)
	}
	for i, w := range want {
		e := es[i]
		if e.Action != w.action || !strings.Contains(e.Actor, w.actor) || e.Scope != w.scope || e.Reason != w.reason || e.Via != "cli" || e.Seq != uint64(i+1) {
			t.Errorf("entry %d: %+v, want %+v", i+1, e, w)
		}
	}
	if !strings.Contains(es[0].Result, "restore ready records where reason=failed into (default), due 2030-01-01T00:00:00Z") {
		t.Errorf("job create's result: %q", es[0].Result)
	}
	if es[3].Result != "removed 1 segment, 4 records, 356 B" && !strings.HasPrefix(es[3].Result, "removed 1 segment") {
		t.Errorf("prune's result: %q", es[3].Result)
	}
	// The table, newest first, filtered.
	r := cli(t, 0, "log", dir, "--action", "job")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SEQ") || !strings.Contains(lines[1], "job.pause") || !strings.Contains(lines[2], "job.create") {
		t.Fatalf("log --action job:\n%s", r.stdout)
	}
	if r := cli(t, 0, "log", dir, "--who", "bob"); strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "prune") {
		t.Fatalf("log --who bob:\n%s", r.stdout)
	}
	// Verified, with the head to keep.
	r = cli(t, 0, "log", dir, "--verify")
	if !strings.Contains(r.stdout, "4 entries in 1 page, chain intact") || !strings.Contains(r.stdout, "head 4:") {
		t.Fatalf("log --verify: %s", r)
	}
	head := strings.TrimSpace(strings.TrimPrefix(strings.Split(r.stdout, "\n")[1], "head "))
	cli(t, 0, "log", dir, "--verify", "--anchor", head)
	// Someone with write access to the store changes entry 3.
	tb, err := (&fs.Reader{Directory: dir}).Table(changelog.Table)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data, version, err := tb.ReadRecord(ctx, "p000000000001")
	if err != nil {
		t.Fatal(err)
	}
	tampered := strings.Replace(string(data), "version 0.9 is accepted again", "routine", 1)
	if _, err := tb.WriteRecord(ctx, "p000000000001", []byte(tampered), version); err != nil {
		t.Fatal(err)
	}
	r = cli(t, exitDamage, "log", dir, "--verify")
	if !strings.Contains(r.stdout, "BROKEN at entry 3 (page 1): its hash does not match its contents") || !strings.Contains(r.stderr, "broken at entry 3") {
		t.Fatalf("log --verify after tampering: %s", r)
	}
	// Usage errors.
	cli(t, exitUsage, "log", dir, "--anchor", head)
	cli(t, exitUsage, "log", dir, "--verify", "--anchor", "3:xyz")
}

// TestChangeLogManyProcesses appends from many dlqdump processes at once:
// every entry is in the log once, in one chain.
func TestChangeLogManyProcesses(t *testing.T) {
	dir := makeSample(t)
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cli(t, 0, "job", "create", dir, "--id", fmt.Sprintf("job-%02d", i), "--at", "2030-01-01T00:00:00Z", "--actor", fmt.Sprintf("p%02d", i))
		})
	}
	wg.Wait()
	es := logEntries(t, dir)
	seen := map[string]int{}
	for _, e := range es {
		seen[e.Scope]++
	}
	if len(es) != n || len(seen) != n {
		t.Fatalf("%d entries for %d jobs: %v", len(es), n, seen)
	}
	if r := cli(t, 0, "log", dir, "--verify"); !strings.Contains(r.stdout, fmt.Sprintf("%d entries", n)) {
		t.Fatalf("%s", r)
	}
}

// TestReplayAndDiscard replays one record by its ID and discards another:
// the replayed one is delivered and gone, the discarded one in the
// quarantine with who and why, the others still ready; both in the log.
func TestReplayAndDiscard(t *testing.T) {
	dir := makeSample(t)
	before := idsOf(t, cli(t, 0, "cat", dir, segA.name()).stdout)
	var replay, discard string
	var replayP, discardP string
	for p, id := range before {
		switch {
		case replay == "":
			replay, replayP = id, p
		case discard == "":
			discard, discardP = id, p
		}
	}
	r := cli(t, 0, "replay", dir, replay, "--actor", "alice", "--reason", "INC-7 fixed")
	if strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, fmt.Sprintf("%q", replayP)) {
		t.Fatalf("replay to stdout: %s", r)
	}
	cli(t, exitUsage, "discard", dir, discard) // no --reason
	cli(t, exitUsage, "discard", dir, "not-an-id", "--reason", "x")
	cli(t, 0, "discard", dir, discard, "--actor", "bob", "--reason", "duplicate of ord-7")
	after := idsOf(t, cli(t, 0, "cat", dir, segA.name()).stdout)
	if _, ok := after[replayP]; ok {
		t.Errorf("the replayed record is still ready")
	}
	if _, ok := after[discardP]; ok {
		t.Errorf("the discarded record is still ready")
	}
	if len(after) != len(before)-2 {
		t.Errorf("%d records left ready, want %d", len(after), len(before)-2)
	}
	q := cli(t, 0, "cat", dir, "--area", "quarantine", "--select", "id = "+discard)
	if !strings.Contains(q.stdout, `"quarantine":"discarded: by bob: duplicate of ord-7"`) {
		t.Errorf("the discarded record in the quarantine: %s", q)
	}
	// Replaying it again finds nothing ready: exit 1, saying so.
	r = cli(t, exitError, "replay", dir, replay)
	if !strings.Contains(r.stderr, "nothing was replayed") {
		t.Errorf("replay of a record replayed already: %s", r)
	}
	es := logEntries(t, dir)
	if len(es) != 2 || es[0].Action != changelog.ActionReplay || es[0].Actor != "alice" || !strings.Contains(es[0].Scope, replay) ||
		es[0].Result != "delivered 1 record to stdout" || es[0].Reason != "INC-7 fixed" ||
		es[1].Action != changelog.ActionDiscard || es[1].Actor != "bob" || !strings.Contains(es[1].Scope, discard) || es[1].Reason != "duplicate of ord-7" {
		t.Fatalf("log: %+v", es)
	}
	// The discarded record goes with the quarantine's retention, alone.
	cli(t, 0, "prune", dir, "--area", "quarantine", "--select", "quarantine ~ discarded", "--reason", "expired")
	if q := cli(t, 0, "cat", dir, "--area", "quarantine", "--select", "id = "+discard); strings.TrimSpace(q.stdout) != "" {
		t.Errorf("after prune --select: %s", q)
	}
	if n := len(names(t, dir, sink.AreaQuarantine)); n != 1 {
		t.Errorf("%d quarantined segments left, want segD alone", n)
	}
}

func names(t *testing.T, dir string, area sink.Area) []string {
	t.Helper()
	var out []string
	for si, err := range (&fs.Reader{Directory: dir}).List(context.Background(), area) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, si.Name)
	}
	return out
}
