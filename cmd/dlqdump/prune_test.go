package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// prune --dry-run says what an age limit removes and changes nothing; prune
// removes exactly that and says so.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	old := segSpec{area: sink.AreaArchive, created: now.Add(-72 * time.Hour), id: 0x01, codec: segment.CodecZstd,
		records: []rec{{now.Add(-72 * time.Hour), nil, []byte("a")}, {now.Add(-71 * time.Hour), nil, []byte("b")}}}
	young := segSpec{area: sink.AreaArchive, created: now.Add(-time.Hour), id: 0x02, codec: segment.CodecZstd,
		records: []rec{{now.Add(-time.Hour), nil, []byte("c")}}}
	pOld, pYoung := writeSegment(t, dir, old), writeSegment(t, dir, young)
	r := cli(t, 0, "prune", dir, "--area", "archive", "--max-age", "24h", "--dry-run")
	if !strings.Contains(r.stdout, "would remove archive/"+old.name()+": 2 records") || strings.Contains(r.stdout, young.name()) ||
		!strings.Contains(r.stdout, "would remove 1 segment, 2 records") || !strings.Contains(r.stdout, "(max_age)") {
		t.Fatalf("dry run: %s", r)
	}
	for _, p := range []string{pOld, pYoung} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the dry run removed %s", p)
		}
	}
	r = cli(t, 0, "prune", dir, "--area", "archive", "--max-age", "24h")
	if !strings.Contains(r.stdout, "removed 1 segment, 2 records") {
		t.Fatalf("prune: %s", r)
	}
	if _, err := os.Stat(pOld); !os.IsNotExist(err) {
		t.Fatalf("%s still there", pOld)
	}
	if _, err := os.Stat(pYoung); err != nil {
		t.Fatalf("%s removed", pYoung)
	}
	if r := cli(t, -1, "prune", dir, "--area", "archive"); r.code != exitUsage {
		t.Fatalf("without a limit: %s", r)
	}
}

// Issue 19, defect 4: ready segments A, B and C, A held by a live restorer,
// --max-segments 1: the dry run and the run both remove B alone (A is due
// and left to its holder; C, the newest, is never removed in its place).
// Before, the dry run said A and B and the run removed B and C.
func TestPruneClaimedOldest(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC()
	var specs []segSpec
	for i := range 3 {
		s := segSpec{area: sink.AreaReady, created: now.Add(time.Duration(i-3) * time.Hour), id: byte(i + 1), codec: segment.CodecZstd,
			records: []rec{{now.Add(time.Duration(i-3) * time.Hour), nil, []byte("x")}}}
		writeSegment(t, dir, s)
		specs = append(specs, s)
	}
	cl := claimAs(t, &fs.Reader{Directory: dir}, specs[0].name(), "live", time.Hour)
	defer cl.Release(context.Background())
	for _, dry := range []bool{true, false} {
		args := []string{"prune", dir, "--area", "ready", "--max-segments", "1"}
		verb := "removed"
		if dry {
			args, verb = append(args, "--dry-run"), "would remove"
		}
		r := cli(t, 0, args...)
		if !strings.Contains(r.stdout, verb+" ready/"+specs[1].name()) || strings.Contains(r.stdout, specs[0].name()) || strings.Contains(r.stdout, specs[2].name()) ||
			!strings.Contains(r.stdout, verb+" 1 segment, 1 record") || !strings.Contains(r.stdout, "left 1 segment due but being restored") {
			t.Fatalf("dry run %v: %s", dry, r)
		}
	}
	for i, s := range specs {
		_, err := os.Stat(segPath(dir, s.area, s.name()))
		if gone := errors.Is(err, os.ErrNotExist); gone != (i == 1) {
			t.Errorf("segment %d: removed %v (%v)", i, gone, err)
		}
	}
}
