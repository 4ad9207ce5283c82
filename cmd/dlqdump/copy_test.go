package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// snapshot returns the bytes of the sample segments in a dump directory.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, s := range sampleSegs {
		b, err := os.ReadFile(segPath(dir, s.area, s.name()))
		if err != nil {
			t.Fatal(err)
		}
		m[s.area.String()+"/"+s.name()] = b
	}
	return m
}

// sameFiles checks that every sample segment has the given bytes in dir.
func sameFiles(t *testing.T, want map[string][]byte, dir string) {
	t.Helper()
	for k, b := range snapshot(t, dir) {
		if !bytes.Equal(b, want[k]) {
			t.Errorf("%s differs in %s", k, dir)
		}
	}
}

func TestCp(t *testing.T) {
	src := makeSample(t)
	dst := filepath.Join(t.TempDir(), "copy")
	r := cli(t, 0, "cp", src, dst)
	for _, s := range sampleSegs {
		if !strings.Contains(r.stdout, "copied "+s.name()+" ("+s.area.String()+", ") {
			t.Errorf("%s not reported; %s", s.name(), r)
		}
	}
	if !strings.Contains(r.stderr, "copied 5 segments from "+src+" to "+dst) {
		t.Errorf("summary: %s", r)
	}
	sameFiles(t, snapshot(t, src), dst)
	if got, want := cli(t, 0, "ls", dst).stdout, cli(t, 0, "ls", src).stdout; got != want {
		t.Errorf("ls of the copy:\n%s\nwant\n%s", got, want)
	}
	// The quarantine reason came along.
	if got, want := cli(t, 0, "quarantine", "ls", dst).stdout, cli(t, 0, "quarantine", "ls", src).stdout; got != want {
		t.Errorf("quarantine ls of the copy:\n%s\nwant\n%s", got, want)
	}
	// Again: identical copies are left alone.
	r = cli(t, 0, "cp", src, dst)
	if !strings.Contains(r.stderr, "(5 already there)") {
		t.Errorf("second cp: %s", r)
	}
	// A different segment of the same name is not overwritten.
	other := t.TempDir()
	diff := segA
	diff.records = diff.records[:3]
	writeSegment(t, other, diff)
	r = cli(t, exitError, "cp", src, other, "--area", "ready")
	if !strings.Contains(r.stderr, "already exists with other content") || !strings.Contains(r.stderr, "1 segment of 3 not copied") {
		t.Errorf("cp over another segment: %s", r)
	}
	if n := strings.Count(cli(t, 0, "cat", other, segA.name()).stdout, "\n"); n != 3 {
		t.Errorf("the other segment was changed: %d records", n)
	}
	// Named segments only, quietly.
	one := t.TempDir()
	if r := cli(t, 0, "cp", src, one, segB.name(), "-q"); r.stdout != "" || r.stderr != "" {
		t.Errorf("cp -q printed: %s", r)
	}
	if n := areaNames(t, one, dlqdump.AreaReady); len(n) != 1 || n[0] != segB.name() {
		t.Errorf("cp of one segment: %v", n)
	}
	cli(t, exitUsage, "cp", src, src)
	cli(t, exitUsage, "cp", src, filepath.Join(src, "quarantine"))
	cli(t, exitUsage, "mv", filepath.Join(src, "archive"), src)
	cli(t, exitUsage, "cp", src)
}

func TestMv(t *testing.T) {
	src := makeSample(t)
	orig := snapshot(t, src)
	origLs := cli(t, 0, "ls", src).stdout
	dst := filepath.Join(t.TempDir(), "moved")
	r := cli(t, 0, "mv", src, dst)
	if !strings.Contains(r.stderr, "moved 5 segments") {
		t.Errorf("summary: %s", r)
	}
	sameFiles(t, orig, dst)
	for _, ar := range allAreas {
		if n := areaNames(t, src, ar); len(n) != 0 {
			t.Errorf("%s segments left in the source: %v", ar, n)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(src, fs.ClaimsDir)); len(entries) != 0 {
		t.Errorf("claim files left: %v", entries)
	}
	if got, want := cli(t, 0, "ls", dst).stdout, origLs; got != want {
		t.Errorf("ls after mv:\n%s\nwant\n%s", got, want)
	}
	// Back again, one area at a time.
	cli(t, 0, "mv", dst, src, "--area", "quarantine")
	cli(t, 0, "mv", dst, src, "--area", "ready")
	cli(t, 0, "mv", dst, src, "--area", "archive")
	sameFiles(t, orig, src)
}

func TestMvClaimed(t *testing.T) {
	src := makeSample(t)
	dst := t.TempDir()
	// A restorer holds A.
	rd := &fs.Reader{Directory: src}
	c, err := rd.Claim(context.Background(), segA.name(), "other-restorer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release(context.Background())
	r := cli(t, exitError, "mv", src, dst)
	if !strings.Contains(r.stderr, "is being restored, not moved") || !strings.Contains(r.stderr, "other-restorer") {
		t.Errorf("mv of a claimed segment: %s", r)
	}
	if n := areaNames(t, src, dlqdump.AreaReady); len(n) != 1 || n[0] != segA.name() {
		t.Errorf("left in the source: %v", n)
	}
	if n := areaNames(t, dst, dlqdump.AreaReady); len(n) != 2 {
		t.Errorf("moved: %v", n)
	}
	// The restorer still holds its claim.
	if err := c.Renew(context.Background(), dlqdump.Checkpoint{}); err != nil {
		t.Errorf("the restorer lost its claim: %v", err)
	}
}

func TestMvPartlyRestored(t *testing.T) {
	src := makeSample(t)
	dst := t.TempDir()
	// A restorer delivered the first blocks of A, then stopped.
	ft := footer(t, segPath(src, dlqdump.AreaReady, segA.name()))
	blk := ft.Blocks[2]
	rd := &fs.Reader{Directory: src}
	c, err := rd.Claim(context.Background(), segA.name(), "crashed-restorer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	cp := dlqdump.Checkpoint{Position: segment.Position{Offset: blk.Offset, Seq: blk.FirstSeq}, Delivered: blk.FirstSeq}
	if err := c.Renew(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	left := 12 - int(blk.FirstSeq)
	if r := cli(t, 0, "ls", src, segA.name()); !strings.Contains(r.stdout, itoa(int(blk.FirstSeq))+" of 12 restored") {
		t.Errorf("ls of a partly restored segment: %s", r)
	}
	want := cli(t, 0, "cat", src, segA.name()).stdout
	if n := strings.Count(want, "\n"); n != left {
		t.Fatalf("cat of a partly restored segment: %d records, want %d", n, left)
	}
	r := cli(t, 0, "mv", src, dst, segA.name())
	if !strings.Contains(r.stderr, "left out the "+itoa(int(blk.FirstSeq))+" records a restorer already delivered") {
		t.Errorf("mv: %s", r)
	}
	if got := cli(t, 0, "cat", dst, segA.name()).stdout; got != renumber(want) {
		t.Errorf("moved records:\n%s\nwant\n%s", got, renumber(want))
	}
	cli(t, 0, "verify", dst)
	if n := areaNames(t, src, dlqdump.AreaReady); len(n) != 2 {
		t.Errorf("left in the source: %v", n)
	}
}
