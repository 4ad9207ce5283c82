package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// TestSummarize gives segments written without summaries (a ready one part
// restored, an archived one) summaries: the records keep their IDs, a
// selection then skips them, the progress moves with the copy (the rest is
// restored once), and a second run has nothing to do.
func TestSummarize(t *testing.T) {
	dir := t.TempDir()
	for s := range 3 {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte, NoSummary: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			h := dlqdump.Headers{"tenant": fmt.Sprint("t", s)}
			if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("item %d-%02d", s, i), Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	first := idsOf(t, cli(t, 0, "cat", dir).stdout)
	if r := cli(t, 0, "cat", dir, "--select", "tenant = t1", "--explain"); !strings.Contains(r.stdout, "reads 3 of 3 segments") {
		t.Fatalf("without summaries: %s", r.stdout)
	}
	// Part of the oldest is restored: its progress must move with it.
	delivered := payloads(t, cli(t, 0, "restore", dir, "--limit", "30").stdout)
	if len(delivered) != 30 {
		t.Fatalf("restore --limit 30 delivered %d", len(delivered))
	}
	r := cli(t, 0, "summarize", dir)
	if strings.Count(r.stdout, "summarized ") != 3 {
		t.Fatalf("summarize: %s", r)
	}
	if r := cli(t, 0, "summarize", dir); !strings.Contains(r.stderr, "summarized 0 segments") || !strings.Contains(r.stderr, "3 segments had one") {
		t.Fatalf("summarize again: %s", r)
	}
	got := idsOf(t, cli(t, 0, "cat", dir).stdout)
	if len(got) != 270 {
		t.Fatalf("%d records ready after summarize, want 270", len(got))
	}
	sameIDs(t, "summarize", got, first)
	if r := cli(t, 0, "cat", dir, "--select", "tenant = t1", "--explain"); !strings.Contains(r.stdout, "reads 1 of 3 segments") {
		t.Fatalf("with summaries: %s", r.stdout)
	}
	rest := payloads(t, cli(t, 0, "restore", dir).stdout)
	all := sorted(append(delivered, rest...))
	if len(all) != 300 || len(rest) != 270 {
		t.Fatalf("%d delivered before summarize, %d after", len(delivered), len(rest))
	}
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("%s delivered twice", all[i])
		}
	}
}
