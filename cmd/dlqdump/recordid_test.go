package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
)

// idsOf returns the record IDs of cat's JSON lines, by payload (the test's
// payloads are unique).
func idsOf(t *testing.T, out string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var v struct {
			ID      string
			Payload string
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if _, err := dlqdump.ParseRecordID(v.ID); err != nil {
			t.Fatalf("cat printed ID %q: %v", v.ID, err)
		}
		if old, dup := ids[v.Payload]; dup {
			t.Fatalf("payload %q twice, IDs %s and %s", v.Payload, old, v.ID)
		}
		ids[v.Payload] = v.ID
	}
	return ids
}

// sameIDs fails unless every record of got has the ID it has in want.
func sameIDs(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) == 0 {
		t.Fatalf("%s: no records", what)
	}
	for p, id := range got {
		if want[p] != id {
			t.Fatalf("%s: record %q has ID %s, first %s", what, p, id, want[p])
		}
	}
}

// TestRecordIDsAcrossCopies: a record keeps its ID through dlqdump cp, mv,
// rewrap, a restore that sets it aside in a quarantine side segment, a
// release from quarantine, and an interrupted restore; IDs are unique.
func TestRecordIDsAcrossCopies(t *testing.T) {
	a, b := genIdentity(t), genIdentity(t)
	ka, kb := keyFile(t, a), keyFile(t, b)
	src := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: src}, Capacity: 8 * dlqdump.Kilobyte,
		BlockSize: dlqdump.Kilobyte, Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{a.Recipient()}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		h := dlqdump.Headers{"k": fmt.Sprint(i)}
		if i%10 == 0 {
			h[dlqdump.HeaderReplays] = "9" // set aside by a restore: replayed too often
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("item %03d", i), Headers: h}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	first := idsOf(t, cli(t, 0, "cat", src, "--identity", ka).stdout)
	if len(first) != n || len(slices.Compact(slices.Sorted(maps.Values(first)))) != n {
		t.Fatalf("%d records, %d distinct IDs", len(first), len(slices.Compact(slices.Sorted(maps.Values(first)))))
	}

	cp, mv := t.TempDir(), t.TempDir()+"/moved"
	cli(t, 0, "cp", src, cp)
	sameIDs(t, "cp", idsOf(t, cli(t, 0, "cat", cp, "--identity", ka).stdout), first)
	cli(t, 0, "mv", cp, mv)
	sameIDs(t, "mv", idsOf(t, cli(t, 0, "cat", mv, "--identity", ka).stdout), first)
	if r := cli(t, 0, "rewrap", mv, "--identity", ka, "--recipient", b.Recipient().String()); !strings.Contains(r.stdout, "rewrapped") {
		t.Fatalf("rewrap: %s", r)
	}
	sameIDs(t, "rewrap", idsOf(t, cli(t, 0, "cat", mv, "--identity", kb).stdout), first)
	// Select one by its ID, after all that.
	one := first["item 150"]
	if got := idsOf(t, cli(t, 0, "cat", mv, "--identity", kb, "--select", "id = "+one).stdout); len(got) != 1 || got["item 150"] != one {
		t.Fatalf("--select id = %s: %v", one, got)
	}

	// An interrupted restore (stopped at its limit, as a crash stops
	// one) leaves the rest with their IDs; the records replayed too often
	// go to quarantine side segments with theirs.
	cli(t, exitUndelivered, "restore", mv, "--identity", kb, "--limit", "40")
	sameIDs(t, "after a partial restore", idsOf(t, cli(t, 0, "cat", mv, "--identity", kb).stdout), first)
	cli(t, exitUndelivered, "restore", mv, "--identity", kb)
	aside := idsOf(t, cli(t, 0, "cat", mv, "--identity", kb, "--area", "quarantine").stdout)
	if len(aside) != n/10 {
		t.Fatalf("%d records set aside, want %d", len(aside), n/10)
	}
	sameIDs(t, "quarantine side segments", aside, first)
	cli(t, 0, "quarantine", "release", mv, "--all")
	sameIDs(t, "released", idsOf(t, cli(t, 0, "cat", mv, "--identity", kb).stdout), first)
}
