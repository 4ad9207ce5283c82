package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/errgroups"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/errcorpus"
)

// TestErrors: dlqdump errors finds the ten families of the corpus, each
// with its count, as a table and as JSON; each group's selection selects
// its records (cat --select counts them); --select narrows.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := errcorpus.Write(context.Background(), &fs.Reader{Directory: dir}, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 6*time.Hour, 2000); err != nil {
		t.Fatal(err)
	}
	r := cli(t, 0, "errors", dir)
	for _, f := range errcorpus.Families {
		if !strings.Contains(r.stdout, fmt.Sprintf("%d  ", f.Count)) || !strings.Contains(r.stdout, "  "+f.Signature+"\n") {
			t.Errorf("no %d × %q in\n%s", f.Count, f.Signature, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%d records in 10 groups; 30 without the \"error\" header", errcorpus.Total())) ||
		!strings.Contains(r.stdout, `--select 'error like "payment gateway timeout after <num>ms"'`) {
		t.Errorf("errors:\n%s", r.stdout)
	}

	var rep errgroups.Report
	if err := json.Unmarshal([]byte(cli(t, 0, "errors", dir, "--json", "--top", "3").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Groups != 10 || len(rep.Shown) != 3 || rep.Shown[0].Count != 10050 || rep.Shown[0].Sample.ID == "" || rep.Bars != 12 {
		t.Fatalf("--json: %+v", rep)
	}
	// The burst of timeouts shows in its trend.
	var peak uint64
	for _, n := range rep.Shown[0].Counts {
		peak = max(peak, n)
	}
	if peak < 10050/4 {
		t.Errorf("the timeouts' counts %v have no burst", rep.Shown[0].Counts)
	}
	for _, g := range rep.Shown {
		out := cli(t, 0, "cat", dir, "--select", g.Select).stdout
		if n := strings.Count(out, "\n"); n != int(g.Count) {
			t.Errorf("cat --select %s: %d records, want %d", g.Select, n, g.Count)
		}
	}
	if err := json.Unmarshal([]byte(cli(t, 0, "errors", dir, "--json", "--select", "source = orders").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Records != uint64(errcorpus.Total()/2) {
		t.Errorf("--select source = orders: %d records, want %d", rep.Records, errcorpus.Total()/2)
	}
	if r := cli(t, 0, "errors", dir, "--header", "source"); !strings.Contains(r.stdout, "orders") || !strings.Contains(r.stdout, "billing") {
		t.Errorf("--header source:\n%s", r.stdout)
	}
	cli(t, exitUsage, "errors", dir, "--select", "error like")
}
