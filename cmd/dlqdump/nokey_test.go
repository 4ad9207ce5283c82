package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// TestRestoreNoKeyCLI: restore --dry-run and restore agree on an encrypted
// dump without a key: both exit 1 naming the segments left; the dry run
// used to exit 0.
func TestRestoreNoKeyCLI(t *testing.T) {
	a, other := genIdentity(t), genIdentity(t)
	dir, _ := encryptedDump(t, 400, a.Recipient())
	names := areaNames(t, dir, sink.AreaReady)
	for _, args := range [][]string{
		{"restore", dir, "--dry-run"},
		{"restore", dir},
		{"restore", dir, "--dry-run", "--identity", keyFile(t, other)},
		{"restore", dir, "--identity", keyFile(t, other)},
	} {
		r := cli(t, exitError, args...)
		if !strings.Contains(r.stderr, "left in place") || !strings.Contains(r.stderr, "--identity") {
			t.Fatalf("%s", r)
		}
		for _, n := range names {
			if !strings.Contains(r.stderr, n) {
				t.Fatalf("segment %s not named: %s", n, r)
			}
		}
		if slices.Contains(args, "--dry-run") && !strings.Contains(r.stdout, "no key for") {
			t.Fatalf("the dry run does not say it: %s", r)
		}
	}
	if got := areaNames(t, dir, sink.AreaReady); len(got) != len(names) {
		t.Fatalf("%d segments ready, want %d", len(got), len(names))
	}
}

// TestQuarantineLsNoKey lists an encrypted quarantine without a key:
// records and times from the block headers, exit 0 (it used to exit 1),
// the same counts as with the key.
func TestQuarantineLsNoKey(t *testing.T) {
	a := genIdentity(t)
	ka := keyFile(t, a)
	dir, _ := encryptedDump(t, 400, a.Recipient())
	name := areaNames(t, dir, sink.AreaReady)[0]
	ft := footer(t, segPath(dir, sink.AreaReady, name))
	if err := os.MkdirAll(filepath.Dir(segPath(dir, sink.AreaQuarantine, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(segPath(dir, sink.AreaReady, name), segPath(dir, sink.AreaQuarantine, name)); err != nil {
		t.Fatal(err)
	}
	ls := func(args ...string) quarantineJSON {
		t.Helper()
		r := cli(t, 0, append([]string{"quarantine", "ls", dir, "--json"}, args...)...)
		var j quarantineJSON
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &j); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		return j
	}
	sealed, open := ls(), ls("--identity", ka)
	if !sealed.Sealed || open.Sealed || sealed.Records != ft.Records || open.Records != ft.Records ||
		sealed.First != jsonTime(ft.MinTime) || sealed.Last != jsonTime(ft.MaxTime) || sealed.First != open.First || sealed.Last != open.Last {
		t.Fatalf("without the key %+v, with it %+v; footer: %d records from %s to %s", sealed, open, ft.Records, ft.MinTime, ft.MaxTime)
	}
	r := cli(t, 0, "quarantine", "ls", dir)
	if !strings.Contains(r.stdout, name) || !strings.Contains(r.stdout, "give --identity") {
		t.Fatalf("quarantine ls without a key: %s", r)
	}
}

// TestPruneNow: --now measures ages from another time; a later one only
// with --dry-run.
func TestPruneNow(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	old := segSpec{area: sink.AreaArchive, created: now.Add(-72 * time.Hour), id: 0x01, codec: segment.CodecZstd,
		records: []rec{{now.Add(-72 * time.Hour), nil, []byte("a")}, {now.Add(-71 * time.Hour), nil, []byte("b")}}}
	young := segSpec{area: sink.AreaArchive, created: now.Add(-time.Hour), id: 0x02, codec: segment.CodecZstd,
		records: []rec{{now.Add(-time.Hour), nil, []byte("c")}}}
	pOld, pYoung := writeSegment(t, dir, old), writeSegment(t, dir, young)
	later := now.Add(48 * time.Hour).Format(time.RFC3339)
	r := cli(t, 0, "prune", dir, "--area", "archive", "--max-age", "24h", "--now", later, "--dry-run")
	if !strings.Contains(r.stdout, "would remove archive/"+old.name()) || !strings.Contains(r.stdout, "would remove archive/"+young.name()) {
		t.Fatalf("dry run two days on: %s", r)
	}
	if r := cli(t, -1, "prune", dir, "--area", "archive", "--max-age", "24h", "--now", later); r.code != exitUsage {
		t.Fatalf("a later --now without --dry-run: %s", r)
	}
	// Two days ago, the old segment was 23 hours old.
	r = cli(t, 0, "prune", dir, "--area", "archive", "--max-age", "24h", "--now", "2d")
	if !strings.Contains(r.stdout, "removed 0 segments") {
		t.Fatalf("two days ago: %s", r)
	}
	r = cli(t, 0, "prune", dir, "--area", "archive", "--max-age", "24h", "--now", "1h")
	if !strings.Contains(r.stdout, "removed 1 segment,") {
		t.Fatalf("an hour ago: %s", r)
	}
	if _, err := os.Stat(pOld); !os.IsNotExist(err) {
		t.Fatalf("%s still there", pOld)
	}
	if _, err := os.Stat(pYoung); err != nil {
		t.Fatalf("%s removed", pYoung)
	}
	if r := cli(t, -1, "prune", dir, "--area", "archive", "--max-age", "24h", "--now", "soon"); r.code != exitUsage {
		t.Fatalf("--now soon: %s", r)
	}
}

// TestLsStatEncryption: ls says which segments are encrypted and for which
// kinds of recipient, without a key; stat counts them.
func TestLsStatEncryption(t *testing.T) {
	a, b := genIdentity(t), genIdentity(t)
	dir, _ := encryptedDump(t, 2000, a.Recipient(), b.Recipient())
	names := areaNames(t, dir, sink.AreaReady)
	r := cli(t, 0, "ls", dir)
	if !strings.Contains(r.stdout, "ENCRYPTED") || strings.Count(r.stdout, "X25519×2") != len(names) {
		t.Fatalf("ls: %s", r)
	}
	r = cli(t, 0, "ls", dir, "--json")
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var j lsJSON
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatal(err)
		}
		if !j.Encrypted || !slices.Equal(j.Recipients, []string{"X25519", "X25519"}) {
			t.Fatalf("ls --json: %s", line)
		}
	}
	r = cli(t, 0, "stat", dir, "--identity", keyFile(t, b))
	if want := fmt.Sprintf("encrypted  %d of %d segments (for X25519 %d)", len(names), len(names), len(names)); !strings.Contains(r.stdout, want) {
		t.Fatalf("stat: want %q: %s", want, r)
	}
}
