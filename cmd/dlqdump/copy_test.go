package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
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
	if n := areaNames(t, one, sink.AreaReady); len(n) != 1 || n[0] != segB.name() {
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
	if entries, _ := os.ReadDir(filepath.Join(src, fs.ClaimsDir)); len(claimFiles(entries)) != 0 {
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
	// A live restorer holds A: it renews its claim while mv runs.
	rd := &fs.Reader{Directory: src}
	cl := claimAs(t, rd, segA.name(), "other-restorer", time.Minute)
	stop := renewing(t, cl)
	r := cli(t, exitError, "mv", src, dst)
	stop()
	if !strings.Contains(r.stderr, "is being restored by \"other-restorer\"") || !strings.Contains(r.stderr, "waiting up to 1m0s") {
		t.Errorf("mv of a claimed segment: %s", r)
	}
	if n := areaNames(t, src, sink.AreaReady); len(n) != 1 || n[0] != segA.name() {
		t.Errorf("left in the source: %v", n)
	}
	if n := areaNames(t, dst, sink.AreaReady); len(n) != 2 {
		t.Errorf("moved: %v", n)
	}
	// The restorer still holds its claim.
	if err := cl.Save(context.Background(), nil); err != nil {
		t.Errorf("the restorer lost its claim: %v", err)
	}
	if err := cl.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestMvClaimedByTheDead moves a segment whose claim was left by a restorer
// that is gone: mv waits for the claim's lease (at least its own, --lease),
// sees it unchanged and takes it over.
func TestMvClaimedByTheDead(t *testing.T) {
	src := makeSample(t)
	dst := t.TempDir()
	claimAs(t, &fs.Reader{Directory: src}, segB.name(), "killed-restorer", time.Second)
	r := cli(t, 0, "mv", src, dst, segB.name(), "--lease", "1s")
	if !strings.Contains(r.stderr, "claimed by killed-restorer: waiting up to 1s") || !strings.Contains(r.stdout, "moved "+segB.name()) {
		t.Errorf("mv of a dead restorer's segment: %s", r)
	}
	if n := areaNames(t, dst, sink.AreaReady); len(n) != 1 {
		t.Errorf("moved: %v", n)
	}
}

func TestMvPartlyRestored(t *testing.T) {
	src := makeSample(t)
	dst := t.TempDir()
	// A restorer delivered the first blocks of A, then stopped.
	ft := footer(t, segPath(src, sink.AreaReady, segA.name()))
	blk := ft.Blocks[2]
	rd := &fs.Reader{Directory: src}
	cl := claimAs(t, rd, segA.name(), "crashed-restorer", time.Minute)
	p := claims.Progress{Offset: blk.Offset, Seq: blk.FirstSeq, Delivered: blk.FirstSeq}
	if err := cl.Save(context.Background(), p.Marshal()); err != nil {
		t.Fatal(err)
	}
	if err := cl.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	done, left := int(blk.FirstSeq), 12-int(blk.FirstSeq)
	counts := itoa(done) + " delivered, " + itoa(left) + " remaining"
	if r := cli(t, 0, "ls", src, segA.name()); !strings.Contains(r.stdout, "released by crashed-restorer (written ") || !strings.Contains(r.stdout, counts) {
		t.Errorf("ls of a partly restored segment: %s", r)
	}
	want := cli(t, 0, "cat", src, segA.name()).stdout
	if n := strings.Count(want, "\n"); n != left {
		t.Fatalf("cat of a partly restored segment: %d records, want %d", n, left)
	}
	orig := snapshot(t, src)
	r := cli(t, 0, "mv", src, dst, segA.name())
	if !strings.Contains(r.stderr, "moved with its restore progress ("+itoa(done)+" delivered)") {
		t.Errorf("mv: %s", r)
	}
	// The copy has the same bytes, and the same progress: ls, cat and a
	// restore of the copy see only what was left.
	if got, _ := os.ReadFile(segPath(dst, sink.AreaReady, segA.name())); !bytes.Equal(got, orig["ready/"+segA.name()]) {
		t.Errorf("the moved segment's bytes differ")
	}
	if r := cli(t, 0, "ls", dst, segA.name()); !strings.Contains(r.stdout, counts) {
		t.Errorf("ls of the moved segment: %s", r)
	}
	if got := cli(t, 0, "cat", dst, segA.name()).stdout; got != want {
		t.Errorf("moved records:\n%s\nwant\n%s", got, want)
	}
	cli(t, 0, "verify", dst)
	if n := areaNames(t, src, sink.AreaReady); len(n) != 2 {
		t.Errorf("left in the source: %v", n)
	}
	if entries, _ := os.ReadDir(filepath.Join(src, fs.ClaimsDir)); len(claimFiles(entries)) != 0 {
		t.Errorf("claim records left in the source: %v", entries)
	}
	tg := newTarget(t, nil)
	cli(t, 0, "restore", dst, "--to", tg.URL)
	got := tg.deliveredNow()
	if len(got) != left {
		t.Errorf("the restore of the moved segment delivered %d records, want the %d left", len(got), left)
	}
	for _, rc := range segA.records[:done] {
		if got[string(rc.payload)] > 0 {
			t.Errorf("%s was delivered before the move and again after it", rc.payload)
		}
	}
}

// claimAs takes the claim on a segment as a restorer named owner would.
func claimAs(t *testing.T, rd sink.Reader, name, owner string, lease time.Duration) *claims.Claim {
	t.Helper()
	c, err := claims.NewClaimer(rd, owner, lease, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Claim(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// renewing renews a claim over and over, as a live restorer would (far
// more often, so that the test does not depend on timing), until stopped.
func renewing(t *testing.T, cl *claims.Claim) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := cl.Save(context.Background(), nil); err != nil {
				t.Errorf("renew: %v", err)
				return
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// claimFiles returns the names of the claim records among entries.
func claimFiles(entries []os.DirEntry) []string {
	var n []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".claim") {
			n = append(n, e.Name())
		}
	}
	return n
}
