package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// footer reads the footer of a segment file.
func footer(t *testing.T, path string) *segment.Footer {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	r, err := segment.NewReader(f, st.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Footer() == nil {
		t.Fatalf("%s is not sealed", path)
	}
	return r.Footer()
}

// flipBit flips one bit of a file at off.
func flipBit(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyIntact(t *testing.T) {
	dir := makeSample(t)
	r := cli(t, 0, "verify", dir)
	for _, s := range sampleSegs {
		want := fmt.Sprintf("ok      %s (%s): %s in ", s.name(), s.area, plural(len(s.records), "record"))
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q; %s", want, r)
		}
	}
	if !strings.Contains(r.stdout, "verified 5 segments, 24 intact records: no damage") {
		t.Errorf("summary: %s", r)
	}
	if r := cli(t, 0, "verify", dir, "--quiet"); r.stdout != "" || r.stderr != "" {
		t.Errorf("--quiet printed: %s", r)
	}
}

func TestVerifyDamage(t *testing.T) {
	dir := makeSample(t)
	// A bit flip in the stored bytes of block 2 of A.
	pathA := segPath(dir, sink.AreaReady, segA.name())
	ftA := footer(t, pathA)
	blk := ftA.Blocks[2]
	flipBit(t, pathA, blk.Offset+segment.BlockHeaderSize+3)
	// C loses its footer: truncated right after its last block.
	pathC := segPath(dir, sink.AreaReady, segC.name())
	ftC := footer(t, pathC)
	if err := os.Truncate(pathC, ftC.Blocks[len(ftC.Blocks)-1].End()+7); err != nil {
		t.Fatal(err)
	}
	// E's header is damaged.
	pathE := segPath(dir, sink.AreaArchive, segE.name())
	flipBit(t, pathE, 20)

	r := cli(t, exitDamage, "verify", dir)
	for _, want := range []string{
		fmt.Sprintf("DAMAGED %s (ready): %d of 12 records readable, 1 of %d blocks damaged", segA.name(), 12-blk.Count, len(ftA.Blocks)),
		fmt.Sprintf("  segment %s offset %d block 2: dlqdump: segment corrupt: block checksum", segA.name(), blk.Offset),
		fmt.Sprintf("DAMAGED %s (ready): 3 records readable, 1 of 2 blocks damaged, no footer", segC.name()),
		fmt.Sprintf("  segment %s offset %d: dlqdump: segment not sealed", segC.name(), ftC.Blocks[0].End()+7),
		fmt.Sprintf("  segment %s offset %d block 1: dlqdump: segment corrupt: 7 bytes left, a block header needs 60 (truncated)", segC.name(), ftC.Blocks[0].End()),
		fmt.Sprintf("DAMAGED %s (archive): header unreadable", segE.name()),
		fmt.Sprintf("  segment %s offset 0: dlqdump: segment corrupt: header checksum", segE.name()),
		fmt.Sprintf("ok      %s (ready)", segB.name()),
		"verified 5 segments, 20 intact records: 3 segments damaged (4 damaged parts)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q; %s", want, r)
		}
	}
	// --quiet keeps the damage.
	q := cli(t, exitDamage, "verify", dir, "--quiet")
	if strings.Contains(q.stdout, "ok ") || !strings.Contains(q.stdout, "DAMAGED "+segA.name()) || strings.Contains(q.stdout, "verified") {
		t.Errorf("--quiet: %s", q)
	}
	// Only the named segments.
	cli(t, 0, "verify", dir, segB.name(), segD.name())
	cli(t, exitDamage, "verify", dir, segC.name())

	// The other commands report the damage with segment and offset, print
	// what is intact, and exit with 3.
	r = cli(t, exitDamage, "cat", dir)
	if n := strings.Count(r.stdout, "\n"); n != 12-int(blk.Count)+5+3 {
		t.Errorf("cat printed %d records; %s", n, r)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("segment %s offset %d block 2", segA.name(), blk.Offset)) {
		t.Errorf("cat does not report the damage; %s", r)
	}
	r = cli(t, exitDamage, "ls", dir)
	if !strings.Contains(r.stdout, "unsealed") || !strings.Contains(r.stdout, "damaged header") ||
		!strings.Contains(r.stderr, fmt.Sprintf("segment %s offset 0", segE.name())) {
		t.Errorf("ls: %s", r)
	}
	cli(t, exitDamage, "stat", dir)

	// Salvage the intact records into another directory: sealed segments
	// of the same names that verify cleanly.
	salv := filepath.Join(t.TempDir(), "salvaged")
	r = cli(t, exitDamage, "verify", dir, "--salvage", salv)
	for _, want := range []string{
		fmt.Sprintf("  salvaged %d intact records to %s", 12-blk.Count, filepath.Join(salv, segA.name())),
		fmt.Sprintf("  salvaged 3 intact records to %s", filepath.Join(salv, segC.name())),
		fmt.Sprintf("  nothing to salvage from %s", segE.name()),
		fmt.Sprintf("salvaged %d records from 2 segments into %s", 12-blk.Count+3, salv),
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q; %s", want, r)
		}
	}
	r = cli(t, 0, "verify", salv)
	if !strings.Contains(r.stdout, fmt.Sprintf("verified 2 segments, %d intact records: no damage", 12-blk.Count+3)) {
		t.Errorf("verify of the salvaged segments: %s", r)
	}
	// The salvaged records are the intact ones, headers, times and IDs
	// kept: the IDs in a record-id header, as the records after the
	// damaged block are at other sequence numbers.
	orig := cli(t, exitDamage, "cat", dir, segA.name(), segC.name()).stdout
	if got := withoutRecordIDs(t, cli(t, 0, "cat", salv).stdout); got != renumber(orig) {
		t.Errorf("salvaged records differ:\n%s\nwant\n%s", got, renumber(orig))
	}
	// A second salvage does not overwrite the first.
	r = cli(t, exitError, "verify", dir, "--salvage", salv)
	if !strings.Contains(r.stderr, "already exists") {
		t.Errorf("second salvage: %s", r)
	}
	cli(t, exitUsage, "verify", dir, "--salvage", dir)
}

// renumber rewrites the seq fields of cat output as a salvaged copy numbers
// them: from 0 in each segment, without gaps.
// withoutRecordIDs checks that each of cat's JSON lines has the header
// record-id holding its ID, and returns the lines without that header.
func withoutRecordIDs(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		var v struct {
			ID      string
			Headers map[string]string
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		h := fmt.Sprintf(`"record-id":%q`, v.ID)
		if v.Headers[dlqdump.HeaderRecordID] != v.ID {
			t.Fatalf("a salvaged record without its ID in a header: %s", line)
		}
		line = strings.Replace(line, h+",", "", 1)
		line = strings.Replace(line, ","+h, "", 1)
		line = strings.Replace(line, `"headers":{`+h+`}`, `"headers":{}`, 1)
		b.WriteString(line)
	}
	return b.String()
}

func renumber(out string) string {
	var b strings.Builder
	seq := map[string]int{}
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		i := strings.Index(line, `"seq":`)
		j := i + strings.Index(line[i:], ",")
		name := line[strings.Index(line, `"segment":"`)+11:]
		name = name[:strings.Index(name, `"`)]
		fmt.Fprintf(&b, "%s\"seq\":%d%s", line[:i], seq[name], line[j:])
		seq[name]++
	}
	return b.String()
}
