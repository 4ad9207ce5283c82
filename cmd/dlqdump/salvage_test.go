package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dlqfs "github.com/dlqdump/dlqdump/fs"
	dlqs3 "github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// archivedA is a copy of A that was restored and archived: every record in
// it was delivered already. (A function: A's records are filled by init.)
func archivedA() segSpec {
	s := segA
	s.area = sink.AreaArchive
	s.id = 0xa9
	return s
}

func archivedName() string { s := archivedA(); return s.name() }

// damagedArchiveSample is the sample dump plus archivedA with a damaged
// block: verify finds it damaged and --salvage would copy its intact
// records out. It returns the directory, the damaged segment's bytes and
// how many of its records are intact.
func damagedArchiveSample(t *testing.T) (string, []byte, int) {
	t.Helper()
	dir := makeSample(t)
	path := writeSegment(t, dir, archivedA())
	ft := footer(t, path)
	flipBit(t, path, ft.Blocks[1].Offset+segment.BlockHeaderSize+3)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return dir, b, len(segA.records) - int(ft.Blocks[1].Count)
}

// treeOf lists the files under dir with their sizes.
func treeOf(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Issue 12, defect 12: verify --salvage into the location being verified
// (the directory itself, its own quarantine or archive area, a directory
// inside it or containing it, another name of it) is refused: the salvaged
// copy of an archived (delivered) segment would be published there and
// restored again. Before the fix only the very same directory was refused.
func TestSalvageIntoVerifiedLocationRefused(t *testing.T) {
	dir, _, intact := damagedArchiveSample(t)
	before := treeOf(t, dir)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dst, how string }{
		{dir, "is the same directory as"},
		{dir + "/.", "is the same directory as"},
		{rel, "is the same directory as"},
		{link, "is the same directory as"},
		{filepath.Join(dir, dlqfs.QuarantineDir), "is inside"},
		{filepath.Join(dir, dlqfs.ArchiveDir), "is inside"},
		{filepath.Join(link, dlqfs.QuarantineDir), "is inside"},
		{filepath.Join(dir, "salvaged", "deeper"), "is inside"},
		{filepath.Dir(dir), "contains"},
	} {
		r := cli(t, exitUsage, "verify", dir, "--salvage", c.dst)
		want := "--salvage " + c.dst + " " + c.how + " the location verified (" + dir + "): salvaged segments are published there as ready"
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--salvage %s: the error does not say %q; %s", c.dst, want, r)
		}
	}
	after := treeOf(t, dir)
	if len(after) != len(before) {
		t.Errorf("refused salvages changed the location verified:\nbefore %v\nafter  %v", before, after)
	}
	for p, n := range before {
		if after[p] != n {
			t.Errorf("%s: size %d, was %d", p, after[p], n)
		}
	}

	// A sibling whose name starts with the same characters is outside:
	// the salvage runs, and copies the archived segment's intact records.
	out := dir + "-salvaged"
	r := cli(t, exitDamage, "verify", dir, "--salvage", out)
	if !strings.Contains(r.stdout, fmt.Sprintf("salvaged %d intact records to %s", intact, filepath.Join(out, archivedName()))) {
		t.Errorf("salvage into a sibling directory: %s", r)
	}
}

// The same on S3: the prefix verified, its quarantine area, a prefix inside
// it or containing it are refused; another prefix of the bucket is not.
func TestSalvageIntoVerifiedPrefixRefused(t *testing.T) {
	forEachS3(t, func(t *testing.T, srv *s3test.Server, loc string) {
		_, damaged, intact := damagedArchiveSample(t)
		// Publish the damaged archived segment on S3 as it is (cp would
		// refuse to copy a damaged segment).
		rd := &dlqs3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: strings.TrimPrefix(loc, "s3://"+srv.Bucket+"/")}
		ctx := context.Background()
		sw, err := rd.Create(ctx, sink.AreaArchive, archivedName())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Write(damaged); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		listing := func() string {
			return cliS3(t, srv, 0, "ls", loc, "--area", "all", "--json").stdout
		}
		before := listing()
		parent := loc[:strings.LastIndex(strings.TrimSuffix(loc, "/"), "/")+1]
		for _, c := range []struct{ dst, how string }{
			{loc, "is the same prefix as"},
			{strings.TrimSuffix(loc, "/"), "is the same prefix as"},
			{loc + "quarantine/", "is inside"},
			{loc + "archive", "is inside"},
			{loc + "salvaged/", "is inside"},
			{parent, "contains"},
			{"s3://" + srv.Bucket, "contains"},
		} {
			r := cliS3(t, srv, exitUsage, "verify", loc, "--salvage", c.dst)
			want := "--salvage " + c.dst + " " + c.how + " the location verified (" + loc + "): salvaged segments are published there as ready"
			if !strings.Contains(r.stderr, want) {
				t.Errorf("--salvage %s: the error does not say %q; %s", c.dst, want, r)
			}
		}
		if after := listing(); after != before {
			t.Errorf("refused salvages changed the prefix verified:\nbefore %s\nafter  %s", before, after)
		}
		// Another prefix of the same bucket, whose name starts like it.
		out := strings.TrimSuffix(loc, "/") + "-salvaged/"
		r := cliS3(t, srv, exitDamage, "verify", loc, "--salvage", out)
		if !strings.Contains(r.stdout, fmt.Sprintf("salvaged %d intact records to %s", intact, out+archivedName())) {
			t.Errorf("salvage into another prefix: %s", r)
		}
	})
}
