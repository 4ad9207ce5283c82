package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// partlyRestored has a restorer named owner claim A, deliver its first
// blocks (up to block 2) and, unless hold, release it; it returns how many
// records it delivered.
func partlyRestored(t *testing.T, dir, owner string, hold bool) int {
	t.Helper()
	blk := footer(t, segPath(dir, sink.AreaReady, segA.name())).Blocks[2]
	cl := claimAs(t, &fs.Reader{Directory: dir}, segA.name(), owner, time.Minute)
	p := claims.Progress{Offset: blk.Offset, Seq: blk.FirstSeq, Delivered: blk.FirstSeq}
	if err := cl.Save(context.Background(), p.Marshal()); err != nil {
		t.Fatal(err)
	}
	if !hold {
		if err := cl.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return int(blk.FirstSeq)
}

// TestClaimShown checks what ls, stat, cat and cp say of a segment a
// restorer holds, having delivered part of it.
func TestClaimShown(t *testing.T) {
	dir := makeSample(t)
	done := partlyRestored(t, dir, "busy-restorer", true)
	left := 12 - done
	counts := itoa(done) + " delivered, " + itoa(left) + " remaining"

	r := cli(t, 0, "ls", dir, segA.name())
	if !strings.Contains(r.stdout, " claimed ") || !strings.Contains(r.stdout, "claimed by busy-restorer (written 20") || !strings.Contains(r.stdout, counts) {
		t.Errorf("ls of a claimed segment: %s", r)
	}
	var j lsJSON
	if err := json.Unmarshal([]byte(cli(t, 0, "ls", dir, segA.name(), "--json").stdout), &j); err != nil {
		t.Fatal(err)
	}
	if c := j.Claim; j.State != "claimed" || c == nil || c.Owner != "busy-restorer" || c.State != "held" || c.Delivered != uint64(done) ||
		c.Remaining == nil || *c.Remaining != uint64(left) || c.Written == "" {
		t.Errorf("ls --json of a claimed segment: %+v, claim %+v", j, j.Claim)
	}
	// stat counts only what is still in the dump.
	var st struct {
		Records uint64         `json:"records"`
		States  map[string]int `json:"states"`
	}
	if err := json.Unmarshal([]byte(cli(t, 0, "stat", dir, "--json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	if st.Records != uint64(24-done) || st.States["claimed"] != 1 || st.States["ready"] != 2 {
		t.Errorf("stat: %+v", st)
	}
	r = cli(t, 0, "cat", dir, segA.name())
	if n := strings.Count(r.stdout, "\n"); n != left || !strings.Contains(r.stderr, "left out the records a restorer handled already ("+itoa(done)+" delivered") {
		t.Errorf("cat of a partly restored segment: %d records; %s", n, r)
	}
	// cp copies the bytes and says what a restorer did with them.
	r = cli(t, 0, "cp", dir, t.TempDir(), segA.name())
	if !strings.Contains(r.stderr, "a restorer (busy-restorer) holds its claim") || !strings.Contains(r.stderr, "already delivered "+itoa(done)+" of its records; they are in the copy too") {
		t.Errorf("cp of a partly restored segment: %s", r)
	}
}

// TestS3MvProgress moves a partly restored segment to S3 and back: its
// restore progress comes along each time, so a restore after the trip
// delivers only what was left.
func TestS3MvProgress(t *testing.T) {
	forEachS3(t, func(t *testing.T, srv *s3test.Server, loc string) {
		src := makeSample(t)
		done := partlyRestored(t, src, "crashed-restorer", false)
		counts := itoa(done) + " delivered, " + itoa(12-done) + " remaining"
		cliS3(t, srv, 0, "mv", src, loc, segA.name())
		if r := cliS3(t, srv, 0, "ls", loc, segA.name()); !strings.Contains(r.stdout, counts) {
			t.Errorf("ls on S3 after mv: %s", r)
		}
		back := filepath.Join(t.TempDir(), "back")
		cliS3(t, srv, 0, "mv", loc, back)
		if r := cli(t, 0, "ls", back, segA.name()); !strings.Contains(r.stdout, counts) {
			t.Errorf("ls after mv back from S3: %s", r)
		}
		if ls := cliS3(t, srv, 0, "ls", loc, "--json").stdout; ls != "" {
			t.Errorf("left on S3: %s", ls)
		}
		tg := newTarget(t, nil)
		cli(t, 0, "restore", back, "--to", tg.URL)
		got := tg.deliveredNow()
		if len(got) != 12-done {
			t.Errorf("delivered %d records after the trip, want the %d left", len(got), 12-done)
		}
		for _, rc := range segA.records[:done] {
			if got[string(rc.payload)] > 0 {
				t.Errorf("%s delivered again after the trip", rc.payload)
			}
		}
	})
}

// cat says it leaves records out only when a restorer handled some: a
// segment released with its progress at its first block prints everything,
// silently.
func TestCatOfAnUntouchedClaim(t *testing.T) {
	dir := makeSample(t)
	blk := footer(t, segPath(dir, sink.AreaReady, segA.name())).Blocks[0]
	cl := claimAs(t, &fs.Reader{Directory: dir}, segA.name(), "idle-restorer", time.Minute)
	p := claims.Progress{Offset: blk.Offset}
	if err := cl.Save(context.Background(), p.Marshal()); err != nil {
		t.Fatal(err)
	}
	if err := cl.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := cli(t, 0, "cat", dir, segA.name())
	if n := strings.Count(r.stdout, "\n"); n != 12 || strings.Contains(r.stderr, "left out") {
		t.Errorf("cat of a segment a restorer released untouched: %d records; %s", n, r)
	}
}
