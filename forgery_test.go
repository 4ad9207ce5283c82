package dlqdump_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// These tests play someone who can write to the store but has no key (a
// leaked bucket credential), against an encrypted dump: each forgery either
// fails, or leaves a trace (damage, a quarantined segment, a log line and a
// metric) with every record still there to restore. None may make records
// vanish while the Restorer reports success.

// failCounter counts the reasons of Fail and the quarantined segments.
type failCounter struct {
	dlqdump.NopMetrics
	mu    sync.Mutex
	fails map[string]int
}

func (m *failCounter) Fail(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fails == nil {
		m.fails = map[string]int{}
	}
	m.fails[reason]++
}

func (m *failCounter) count(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fails[reason]
}

// forgeryDump dumps items into a new directory, encrypted for id, in one
// segment of several blocks, and returns the directory, the segment's name
// and its blocks.
func forgeryDump(t *testing.T, id *age.X25519Identity, items []string) (string, string, []segment.BlockInfo) {
	t.Helper()
	dir := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte, BlockSize: dlqdump.Kilobyte,
		Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{id.Recipient()}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	rd := &fs.Reader{Directory: dir}
	names := areaNames(t, rd, sink.AreaReady)
	if len(names) != 1 {
		t.Fatalf("%d segments", len(names))
	}
	f, err := rd.Open(context.Background(), sink.AreaReady, names[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Footer().Blocks) < 4 {
		t.Fatalf("%d blocks", len(sr.Footer().Blocks))
	}
	return dir, names[0], sr.Footer().Blocks
}

// forgeProgress writes p, unsigned, into the record of segment name, as
// anyone who can write to the store can.
func forgeProgress(t *testing.T, rd sink.Reader, name string, p claims.Progress) {
	t.Helper()
	ctx := context.Background()
	cl, err := claims.NewClaimer(rd, "forger", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cl.Claim(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx, p.Marshal()); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// restoreWith runs passes of a Restorer with identity id over rd until one
// claims nothing, and returns what it delivered and its reports, summed.
func restoreWith(t *testing.T, rd sink.Reader, id *age.X25519Identity, m dlqdump.MetricsWriter) (map[string]int, dlqdump.Report) {
	t.Helper()
	c := &collector{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: poisonDecoder{}, Queue: c, MetricsWriter: m,
		Encryption: &dlqdump.Encryption{Identities: []envelope.Identity{id}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var sum dlqdump.Report
	for range 20 {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sum.Delivered += rep.Delivered
		sum.Segments += rep.Segments
		sum.QuarantinedSegments += rep.QuarantinedSegments
		sum.DamagedBlocks += rep.DamagedBlocks
		if rep.Claimed == 0 {
			return c.delivered(), sum
		}
	}
	t.Fatal("restoring does not end")
	return nil, sum
}

// releaseAll moves every quarantined segment back to ready.
func releaseAll(t *testing.T, rd sink.Reader) {
	t.Helper()
	for _, n := range areaNames(t, rd, sink.AreaQuarantine) {
		if err := rd.Move(context.Background(), n, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForgedProgress writes progress a restorer never wrote into the claim
// record of an encrypted segment: a position past the first blocks, or
// "done". The Restorer does not act on it: it quarantines the segment with
// the reason (a log line, Fail("unauthenticated_progress")) and clears the
// progress, so that releasing it restores every record. Before, it resumed
// at the forged position (or finished the segment) and deleted it: the
// records before the position were never delivered, and nothing said so.
func TestForgedProgress(t *testing.T) {
	a := newIdentity(t)
	items, good := encItems("forged", 600)
	for _, c := range []struct {
		name string
		prog func(blocks []segment.BlockInfo) claims.Progress
	}{
		{"position", func(bl []segment.BlockInfo) claims.Progress {
			return claims.Progress{Offset: bl[2].Offset, Seq: bl[2].FirstSeq, Delivered: bl[2].FirstSeq}
		}},
		{"done", func(bl []segment.BlockInfo) claims.Progress {
			last := bl[len(bl)-1]
			return claims.Progress{Offset: last.End(), Seq: last.FirstSeq + uint64(last.Count), Delivered: 7, Done: true}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, name, blocks := forgeryDump(t, a, items)
			rd := &fs.Reader{Directory: dir}
			forgeProgress(t, rd, name, c.prog(blocks))
			m := &failCounter{}
			got, rep := restoreWith(t, rd, a, m)
			if len(got) != 0 || rep.QuarantinedSegments != 1 || m.count("unauthenticated_progress") != 1 {
				t.Fatalf("forged progress: delivered %d, report %+v, fails %v", len(got), rep, m.fails)
			}
			q := areaNames(t, rd, sink.AreaQuarantine)
			if len(q) != 1 || q[0] != name {
				t.Fatalf("quarantined %v, want %s", q, name)
			}
			// Released, every record is restored once.
			releaseAll(t, rd)
			got, _ = restoreWith(t, rd, a, m)
			checkDelivered(t, got, good)
			if m.count("unauthenticated_progress") != 1 {
				t.Fatalf("fails %v after the release", m.fails)
			}
		})
	}
}

// TestSignedProgressResumes: a pass stopped by its Limit leaves a signed
// progress; the next Restorer resumes there, delivering nothing twice.
func TestSignedProgressResumes(t *testing.T) {
	a := newIdentity(t)
	items, good := encItems("signed", 600)
	dir, _, _ := forgeryDump(t, a, items)
	rd := &fs.Reader{Directory: dir}
	c := &collector{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: poisonDecoder{}, Queue: c,
		Encryption: &dlqdump.Encryption{Identities: []envelope.Identity{a}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := r.Run(context.Background(), dlqdump.RunOptions{Limit: 100}); err != nil || rep.Delivered+rep.Quarantined != 100 {
		t.Fatalf("first pass: %+v, %v", rep, err)
	}
	r.Close()
	m := &failCounter{}
	got, rep := restoreWith(t, rd, a, m)
	for k, n := range c.delivered() {
		got[k] += n
	}
	checkDelivered(t, got, good)
	if rep.QuarantinedSegments != 0 || m.count("unauthenticated_progress") != 0 {
		t.Fatalf("report %+v, fails %v", rep, m.fails)
	}
}

// TestForgedSuccessor names as the segment's rewrapped copy another
// encrypted segment, published pending on it, as dlqdump rewrap leaves a
// copy: the copy does not hold the segment's blocks, so the Restorer
// restores the segment instead of removing it (Fail("not_a_copy")). Before,
// it removed the segment: its records were never delivered.
func TestForgedSuccessor(t *testing.T) {
	a := newIdentity(t)
	items, good := encItems("orig", 600)
	dir, name, _ := forgeryDump(t, a, items)
	rd := &fs.Reader{Directory: dir}
	other, _ := encItems("other", 300)
	odir, oname, _ := forgeryDump(t, a, other)
	ctx := context.Background()
	// The forged copy: another segment (written later: its name sorts
	// after the original's), pending on it.
	copyName := oname
	data, err := os.ReadFile(filepath.Join(odir, oname))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, copyName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cl, err := claims.NewClaimer(rd, "forger", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Reserve(ctx, copyName, name); err != nil {
		t.Fatal(err)
	}
	forgeProgress(t, rd, name, claims.Progress{Successor: copyName})
	m := &failCounter{}
	got, _ := restoreWith(t, rd, a, m)
	for _, it := range other {
		if good[it] == 0 && !strings.HasPrefix(it, "poison") {
			good[it] = 1
		}
	}
	checkDelivered(t, got, good)
	if m.count("not_a_copy") != 1 {
		t.Fatalf("fails %v", m.fails)
	}
}

// TestRemovedBlockRestore removes a block from the middle of an encrypted
// segment, and its footer, which no longer fits (an unsealed segment, as a
// writer that died leaves it): the Restorer delivers every other record and
// quarantines the segment for the damage. Before, it delivered the others
// and deleted the segment, reporting success.
func TestRemovedBlockRestore(t *testing.T) {
	a := newIdentity(t)
	items, good := encItems("removed", 600)
	dir, name, blocks := forgeryDump(t, a, items)
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := blocks[2]
	cut := append(append([]byte(nil), data[:b.Offset]...), data[b.End():blocks[len(blocks)-1].End()]...)
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	// Which records were in the block.
	all, err := readEncPlain(data, a)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for seq := b.FirstSeq; seq < b.FirstSeq+uint64(b.Count); seq++ {
		lost++
		delete(good, all[seq])
	}
	rd := &fs.Reader{Directory: dir}
	got, rep := restoreWith(t, rd, a, &failCounter{})
	checkDelivered(t, got, good)
	if rep.DamagedBlocks == 0 || rep.QuarantinedSegments != 1 || !slices.Contains(areaNames(t, rd, sink.AreaQuarantine), name) {
		t.Fatalf("a block removed: report %+v (its %d records are gone)", rep, lost)
	}
}

// readEncPlain reads the payloads of an encrypted segment, by sequence
// number.
func readEncPlain(data []byte, id *age.X25519Identity) (map[uint64]string, error) {
	sr, err := segment.NewReader(strings.NewReader(string(data)), int64(len(data)), &segment.ReaderOptions{Keys: envelope.NewKeyring(id)})
	if err != nil {
		return nil, err
	}
	out := map[uint64]string{}
	for {
		rec, err := sr.Next()
		if err != nil {
			return out, nil
		}
		out[rec.Seq] = string(rec.Payload)
	}
}

// TestForgedFooter changes the footer's index of an encrypted segment (it
// is not authenticated: a process without the key seals the segments its
// writer left open), checksum fixed: it no longer matches the blocks,
// whose headers are authenticated. The Restorer reports the footer as
// damage, reads the blocks as they are, delivers every record and
// quarantines the segment, rather than skip a block. Before, the blocks the
// footer lied about were skipped as damage.
func TestForgedFooter(t *testing.T) {
	a := newIdentity(t)
	items, good := encItems("footer", 600)
	dir, name, blocks := forgeryDump(t, a, items)
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The index entry of block 1 says it holds one record less, block 2
	// one more: the index still counts every record.
	foff := blocks[len(blocks)-1].End()
	e1 := foff + segment.FooterFixedSize + segment.IndexEntrySize
	e2 := e1 + segment.IndexEntrySize
	le := binary.LittleEndian
	le.PutUint32(data[e1+16:], le.Uint32(data[e1+16:])-1)
	le.PutUint64(data[e2+8:], le.Uint64(data[e2+8:])-1)
	le.PutUint32(data[e2+16:], le.Uint32(data[e2+16:])+1)
	flen := int64(len(data)) - segment.TrailerSize - foff
	le.PutUint32(data[foff+flen-4:], crc32.Checksum(data[foff:foff+flen-4], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rd := &fs.Reader{Directory: dir}
	got, rep := restoreWith(t, rd, a, &failCounter{})
	checkDelivered(t, got, good)
	if rep.DamagedBlocks != 1 || !slices.Contains(areaNames(t, rd, sink.AreaQuarantine), name) {
		t.Fatalf("a forged footer: report %+v", rep)
	}
}

// TestTruncatedAndResealed is what stays possible: cutting off a segment's
// last blocks and sealing what is left with a new footer, as a process
// without the key legitimately seals a segment its writer left open. The
// blocks left are intact and authentic, and nothing records how many there
// were: the Restorer delivers them and removes the segment. It is no more
// than deleting the segment, which anyone who can write to the store can
// do; docs/ENCRYPTION.md says so ("What is encrypted, and what is not").
func TestTruncatedAndResealed(t *testing.T) {
	a := newIdentity(t)
	items, _ := encItems("truncated", 600)
	dir, name, blocks := forgeryDump(t, a, items)
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keep := blocks[len(blocks)-2].End()
	res, err := segment.Scan(strings.NewReader(string(data[:keep])), keep, nil)
	if err != nil || res.Damage != nil || res.End != keep {
		t.Fatalf("scan: %+v, %v", res, err)
	}
	var out bytes.Buffer
	out.Write(data[:keep])
	if err := segment.Seal(&out, res); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	all, err := readEncPlain(data, a)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for seq := range res.Records {
		if p := all[seq]; !strings.HasPrefix(p, "poison") {
			want[p] = 1
		}
	}
	rd := &fs.Reader{Directory: dir}
	got, rep := restoreWith(t, rd, a, &failCounter{})
	checkDelivered(t, got, want)
	if rep.DamagedBlocks != 0 || rep.QuarantinedSegments != 0 || rep.Segments != 1 {
		t.Fatalf("report %+v", rep)
	}
}
