package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	ifaults "github.com/dlqdump/dlqdump/internal/faults"
)

// dropDest accepts every record.
type dropDest struct{}

func (dropDest) Enqueue(any) error { return nil }

// midCarve dumps n records into dir, the first 11500 of batch 0 and then
// alternately 0 and 1 (a carving pass's runs fill its progress before the
// end: it writes them into a side segment on the way), then runs a carving
// pass over batch 0 with point failing, which leaves the segment's
// progress listing carved runs and naming the side segment being written.
func midCarve(t *testing.T, dir string, n int, point string, enc *dlqdump.Encryption, dec *dlqdump.Encryption) {
	t.Helper()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte, BlockSize: 512, NoSummary: true, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b := i % 2
		if i < 11500 {
			b = 0
		}
		if err := q.Enqueue(dlqdump.Envelope{Item: fmt.Sprintf("item-%05d-batch-%d", i, b), Headers: dlqdump.Headers{"batch": fmt.Sprint(b)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	pt, err := ifaults.ParsePoint(point)
	if err != nil {
		t.Fatal(err)
	}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: ifaults.WrapReader(&fs.Reader{Directory: dir}, ifaults.New(pt)), Decoder: decoder.Fallthrough{AsString: true}, Queue: dropDest{}, Encryption: dec})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rep, err := r.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{"batch": "0"}, Carve: true}); err == nil || rep.Carved == 0 || rep.Delivered != 0 {
		t.Fatalf("the carving pass: %+v, %v; want it failed writing its side segment", rep, err)
	}
}

// onceEachPayload fails unless got holds n distinct records, each once.
func onceEachPayload(t *testing.T, got []string, n int) {
	t.Helper()
	seen := map[string]int{}
	dup := 0
	for _, g := range got {
		if seen[g]++; seen[g] == 2 {
			dup++
		}
	}
	if len(seen) != n || dup > 0 {
		t.Fatalf("delivered %d distinct records of %d, %d twice", len(seen), n, dup)
	}
}

// dlqdump summarize refuses a segment a carving pass is taking records out
// of (its progress lists carved runs and names the side segment being
// written): restored after, every record is delivered once. Before, it
// replaced the segment, carrying that progress into the copy, and a
// restore delivered 4,081 of 12,000 records twice.
func TestSummarizeRefusesASegmentMidCarve(t *testing.T) {
	dir := t.TempDir()
	const n = 12000
	midCarve(t, dir, n, "Reader.Unstage#1/lost", nil, nil)
	res := cli(t, 1, "summarize", dir)
	if !strings.Contains(res.stderr, "in flight") {
		t.Fatalf("summarize: %s", res)
	}
	got := payloads(t, cli(t, -1, "restore", dir).stdout)
	got = append(got, payloads(t, cli(t, -1, "restore", dir).stdout)...)
	onceEachPayload(t, got, n)
}

// dlqdump rewrap refuses a segment a carving pass is taking records out of:
// the segment stays as it was, and a restore delivers every record once.
// Before, it rewrapped it, carrying the progress into the copy, whose
// offsets differ: a restore moved the copy to quarantine ("its progress
// sets aside records … which the segment does not have"), released, it went
// back there, and no record was delivered.
func TestRewrapRefusesASegmentMidCarve(t *testing.T) {
	a, b, c := genIdentity(t), genIdentity(t), genIdentity(t)
	ka := keyFile(t, a)
	dir := t.TempDir()
	const n = 12000
	midCarve(t, dir, n, "Reader.Create#1/fail",
		&dlqdump.Encryption{Recipients: []envelope.Recipient{a.Recipient(), b.Recipient()}},
		&dlqdump.Encryption{Identities: []envelope.Identity{a}})
	res := cli(t, 1, "rewrap", dir, "--identity", ka, "--recipient", c.Recipient().String())
	if !strings.Contains(res.stderr, "in flight") {
		t.Fatalf("rewrap: %s", res)
	}
	got := payloads(t, cli(t, -1, "restore", dir, "--identity", ka).stdout)
	got = append(got, payloads(t, cli(t, -1, "restore", dir, "--identity", ka).stdout)...)
	onceEachPayload(t, got, n)
}

// dlqdump mv refuses a segment a carving pass is taking records out of: its
// side segment is reserved in the source, pending on it; moved, it would be
// written in the destination too. Restored where it is, every record is
// delivered once.
func TestMoveRefusesASegmentMidCarve(t *testing.T) {
	dir, dst := t.TempDir(), t.TempDir()
	const n = 12000
	midCarve(t, dir, n, "Reader.Create#1/fail", nil, nil)
	res := cli(t, -1, "mv", dir, dst)
	if res.code == 0 || !strings.Contains(res.stderr, "writing side segments") {
		t.Fatalf("mv: %s", res)
	}
	got := payloads(t, cli(t, -1, "restore", dir).stdout)
	got = append(got, payloads(t, cli(t, -1, "restore", dir).stdout)...)
	onceEachPayload(t, got, n)
}
