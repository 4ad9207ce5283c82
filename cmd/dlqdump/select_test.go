package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/selection/selectiontest"
)

// TestSelectCases runs the selection language's shared table through
// dlqdump cat --select: the same records selected as the library selects,
// the same errors, exit status 2 with the column and a caret.
func TestSelectCases(t *testing.T) {
	tb := selectiontest.Load(t)
	dir := t.TempDir()
	tb.Write(t, &fs.Reader{Directory: dir})
	for _, c := range tb.Cases {
		t.Run(c.Expr, func(t *testing.T) {
			if strings.ContainsRune(c.Expr, 0) {
				t.Skip("a command line cannot hold a NUL byte")
			}
			if c.Error != "" {
				r := cli(t, 2, "cat", dir, "--area", "all", "--select", c.Expr)
				if !strings.Contains(r.stderr, c.Error) || !strings.Contains(r.stderr, fmt.Sprintf("at column %d", c.Column)) || !strings.Contains(r.stderr, "^") {
					t.Fatalf("stderr %q lacks %q at column %d with a caret", r.stderr, c.Error, c.Column)
				}
				return
			}
			r := cli(t, 0, "cat", dir, "--area", "all", "--select", c.Expr)
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				if line == "" {
					continue
				}
				var rec struct{ ID string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				name := tb.ByID(rec.ID)
				if name == "" {
					t.Fatalf("cat printed a record of ID %q, which the table has not", rec.ID)
				}
				got = append(got, name)
			}
			if g, w := strings.Join(selectiontest.Sorted(got), ","), strings.Join(selectiontest.Sorted(c.Match), ","); g != w {
				t.Fatalf("cat --select %q printed %s, want %s", c.Expr, g, w)
			}
		})
	}
}

// TestSelectAreasAndExplain: an expression naming an area reads it
// without --area; --explain says what the summaries rule out.
func TestSelectAreasAndExplain(t *testing.T) {
	tb := selectiontest.Load(t)
	dir := t.TempDir()
	tb.Write(t, &fs.Reader{Directory: dir})
	r := cli(t, 0, "cat", dir, "--select", "area = quarantine and reason = failed")
	if strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, `"area":"quarantine"`) {
		t.Fatalf("area = quarantine without --area: %s", r)
	}
	// Without --area and a selection naming none: the ready area.
	if r := cli(t, 0, "cat", dir, "--select", "reason = failed"); strings.Count(r.stdout, "\n") != 2 {
		t.Fatalf("reason = failed, ready: %s", r)
	}
	r = cli(t, 0, "cat", dir, "--area", "all", "--select", "reason = deadline", "--explain")
	for _, want := range []string{"selection: reason = deadline", "quarantine/" + tb.Segments[1].Name + ": ruled out by reason = deadline (summary)",
		tb.Segments[0].Name + ": 1 of 2 blocks", "reads 1 of 2 segments, 1 of 3 blocks"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--explain lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestCatQuarantineHint: a location whose ready area is empty and whose
// quarantine is not says so on stderr.
func TestCatQuarantineHint(t *testing.T) {
	tb := selectiontest.Load(t)
	tb.Segments = tb.Segments[1:] // the quarantined one only
	dir := t.TempDir()
	tb.Write(t, &fs.Reader{Directory: dir})
	r := cli(t, 0, "cat", dir)
	if r.stdout != "" || !strings.Contains(r.stderr, "1 quarantined segment is there: dlqdump cat "+dir+" --area quarantine") {
		t.Fatalf("cat of a dump whose records are all quarantined: %s", r)
	}
	if r := cli(t, 0, "cat", dir, "--area", "quarantine"); strings.Count(r.stdout, "\n") != 2 || strings.Contains(r.stderr, "quarantined") {
		t.Fatalf("cat --area quarantine: %s", r)
	}
	// An empty dump says nothing of quarantine.
	if r := cli(t, 0, "cat", t.TempDir()); r.stderr != "" {
		t.Fatalf("cat of an empty dump: %s", r)
	}
}
