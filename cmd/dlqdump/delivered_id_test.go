package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
)

// deliveredIDs returns the record IDs restore wrote to stdout (its
// "record-id" header), by payload.
func deliveredIDs(t *testing.T, out string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v struct {
			Headers map[string]string
			Payload string
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		ids[v.Payload] = v.Headers[dlqdump.HeaderRecordID]
	}
	return ids
}

// TestDeliveredRecordIDs: every record restore delivers carries its ID (the
// "record-id" header on stdout; Idempotency-Key and X-Dlq-Record-Id over
// HTTP), the ID cat shows, after cp, mv, rewrap and a release from
// quarantine.
func TestDeliveredRecordIDs(t *testing.T) {
	a, b := genIdentity(t), genIdentity(t)
	ka, kb := keyFile(t, a), keyFile(t, b)
	src := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: src}, Capacity: 8 * dlqdump.Kilobyte,
		BlockSize: dlqdump.Kilobyte, Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{a.Recipient()}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("item %03d", i), Headers: dlqdump.Headers{"k": fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	first := idsOf(t, cli(t, 0, "cat", src, "--identity", ka).stdout)

	c1 := t.TempDir()
	cli(t, 0, "cp", src, c1)
	sameIDs(t, "restore of a cp", deliveredIDs(t, cli(t, 0, "restore", c1, "--identity", ka).stdout), first)

	c2, m := t.TempDir(), t.TempDir()+"/moved"
	cli(t, 0, "cp", src, c2)
	cli(t, 0, "mv", c2, m)
	cli(t, 0, "rewrap", m, "--identity", ka, "--recipient", b.Recipient().String())
	// An endpoint that refuses every tenth record: those go to quarantine.
	refused := func(body string) bool { return strings.HasSuffix(body, "0") }
	tg := newTarget(t, func(body string, _ int) int {
		if refused(body) {
			return http.StatusUnprocessableEntity
		}
		return http.StatusOK
	})
	cli(t, exitUndelivered, "restore", m, "--identity", kb, "--to", tg.URL)
	checkKeys := func(what string, tg *target, want func(string) bool) {
		t.Helper()
		got := 0
		for p, id := range first {
			if !want(p) {
				continue
			}
			h := tg.headersOf(p)
			if h == nil {
				t.Fatalf("%s: %q not delivered", what, p)
			}
			if h.Get("Idempotency-Key") != id || h.Get("X-Dlq-Record-Id") != id {
				t.Fatalf("%s: %q delivered with Idempotency-Key %q, X-Dlq-Record-Id %q; its ID is %s", what, p, h.Get("Idempotency-Key"), h.Get("X-Dlq-Record-Id"), id)
			}
			got++
		}
		if got == 0 {
			t.Fatalf("%s: nothing checked", what)
		}
	}
	checkKeys("after mv and rewrap", tg, func(p string) bool { return !refused(p) })
	cli(t, 0, "quarantine", "release", m, "--all")
	ok := newTarget(t, nil)
	cli(t, 0, "restore", m, "--identity", kb, "--to", ok.URL)
	checkKeys("after a release", ok, refused)
	if len(ok.deliveredNow()) != n/10 {
		t.Fatalf("after the release: %d delivered, want %d", len(ok.deliveredNow()), n/10)
	}

	sameIDs(t, "restore of the original", deliveredIDs(t, cli(t, 0, "restore", src, "--identity", ka).stdout), first)
}
