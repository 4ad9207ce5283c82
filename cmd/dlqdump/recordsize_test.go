package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump/sink"
)

// A record larger than the default MaxRecordSize (8 MiB), dumped by a Queue
// that allows it, is restored with --max-record-size; without the flag its
// segment is quarantined as too_large, never read whole.
func TestMaxRecordSizeFlag(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 9<<20)
	seg := segSpec{area: sink.AreaReady, created: t0, id: 0x71, version: segA.version, records: []rec{{t0, nil, big}}}
	seg.codec = segA.codec

	dir := t.TempDir()
	writeSegment(t, dir, seg)
	r := cli(t, exitUndelivered, "restore", dir)
	if strings.Contains(r.stdout, string(big[:100])) {
		t.Fatalf("a 9 MiB record was delivered under the default cap: %.300s", r)
	}
	if q := areaNames(t, dir, sink.AreaQuarantine); len(q) != 1 {
		t.Fatalf("quarantine holds %v, want the segment; %.500s", q, r)
	}

	dir = t.TempDir()
	writeSegment(t, dir, seg)
	r = cli(t, 0, "restore", dir, "--max-record-size", "16MiB")
	if !strings.Contains(r.stdout, string(big[:100])) || len(r.stdout) < len(big) {
		t.Fatalf("the 9 MiB record was not delivered with --max-record-size 16MiB: %.300s", r)
	}
	if n := areaNames(t, dir, sink.AreaReady); len(n) != 0 {
		t.Fatalf("ready segments left: %v", n)
	}

	r = cli(t, exitUsage, "restore", dir, "--max-record-size", "lots")
	if !strings.Contains(r.stderr, "max-record-size") {
		t.Fatalf("a bad size's error does not name the flag: %s", r)
	}
}
