package errgroups_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/errgroups"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/errcorpus"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// dumpCorpus writes errcorpus's records into dir.
func dumpCorpus(t testing.TB, dir string) int {
	t.Helper()
	if _, err := errcorpus.Write(context.Background(), &fs.Reader{Directory: dir}, time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 6*time.Hour, 2000); err != nil {
		t.Fatal(err)
	}
	return errcorpus.Total()
}

// countDir counts the records of dir's segments, one Counter per segment
// merged.
func countDir(t testing.TB, dir string, o *errgroups.Options) *errgroups.Counter {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	all := errgroups.New(o)
	for _, path := range names {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		sr, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := errgroups.New(o)
		h := sr.Header()
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			c.Add(&h, sink.AreaReady, filepath.Base(path), &rec)
		}
		f.Close()
		all.Merge(c)
	}
	return all
}

// TestTenFamilies: ten error families whose messages vary in numbers, ids,
// hex, UUIDs, quoted values and addresses are ten groups, each with its
// count, and each group's selection selects its records and only those.
func TestTenFamilies(t *testing.T) {
	dir := t.TempDir()
	total := dumpCorpus(t, dir)
	c := countDir(t, dir, nil)
	rep := c.Report(0, 24)
	if rep.Records != uint64(total) || rep.Without != errcorpus.Without || rep.Groups != len(errcorpus.Families) {
		t.Fatalf("%d records, %d without, %d groups; want %d, %d, %d", rep.Records, rep.Without, rep.Groups, total, errcorpus.Without, len(errcorpus.Families))
	}
	for i, f := range errcorpus.Families {
		g := rep.Shown[i]
		if g.Signature != f.Signature || g.Count != uint64(f.Count) {
			t.Errorf("group %d: %q × %d, want %q × %d", i, g.Signature, g.Count, f.Signature, f.Count)
		}
		var sum uint64
		for _, n := range g.Counts {
			sum += n
		}
		if sum != g.Count || len(g.Counts) != rep.Bars || g.Sample.ID == "" || g.First.After(g.Last) {
			t.Errorf("group %q: counts %v (sum %d), sample %+v", g.Signature, g.Counts, sum, g.Sample)
		}
		_, err := selection.Parse(g.Select, nil)
		if err != nil {
			t.Fatalf("group %q: select %q: %v", g.Signature, g.Select, err)
		}
		if want := fmt.Sprintf("error like %q", f.Signature); g.Select != want {
			t.Errorf("select %s, want %s", g.Select, want)
		}
	}
}

// Past MaxGroups, records are counted in Other; merging keeps counts.
func TestMaxGroups(t *testing.T) {
	dir := t.TempDir()
	total := dumpCorpus(t, dir)
	c := countDir(t, dir, &errgroups.Options{MaxGroups: 3})
	gs := c.Groups()
	var sum uint64
	other := false
	for _, g := range gs {
		sum += g.Count
		other = other || g.Signature == errgroups.Other
	}
	if len(gs) > 4 || !other || sum != uint64(total-errcorpus.Without) {
		t.Fatalf("%d groups (other: %t), %d records; want at most 4 with (other), %d", len(gs), other, sum, total-errcorpus.Without)
	}
}

func TestOtherHeader(t *testing.T) {
	dir := t.TempDir()
	total := dumpCorpus(t, dir)
	c := countDir(t, dir, &errgroups.Options{Header: "reason"})
	if gs := c.Groups(); len(gs) != 1 || gs[0].Signature != "failed" || gs[0].Count != uint64(total) {
		t.Fatalf("by reason: %+v", gs)
	}
}
