package main

import (
	"os"
	"strings"
	"testing"
	"time"

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
