package main

import (
	"bytes"
	bin "encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// tamperBlock changes a byte of the sealed bytes of the block b of data and
// makes its checksum right again, as someone who can write to the store but
// has no key would.
func tamperBlock(data []byte, b segment.BlockInfo) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	data[b.Offset+segment.BlockHeaderSize+3] ^= 0x40
	hdr := data[b.Offset : b.Offset+segment.BlockHeaderSize]
	stored := data[b.Offset+segment.BlockHeaderSize : b.End()]
	crc := crc32.Update(crc32.Checksum(stored, castagnoli), castagnoli, hdr[:56])
	bin.LittleEndian.PutUint32(hdr[56:], crc)
}

// tamperDump dumps items of one block each, not compressed, into a new
// directory, encrypted for recipients: blocks whose sizes differ by up to
// 800 bytes, as a reader that mishandles its buffers after a failed open
// trips on. It returns the directory and the items.
func tamperDump(t *testing.T, recipients ...envelope.Recipient) (string, []string) {
	t.Helper()
	dir := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 16 * dlqdump.Kilobyte,
		BlockSize: dlqdump.Kilobyte, Codec: dlqdump.NoCompression, Encryption: &dlqdump.Encryption{Recipients: recipients}})
	if err != nil {
		t.Fatal(err)
	}
	var items []string
	for i := range 40 {
		it := fmt.Sprintf(`{"order":%d,"note":"%s"}`, i, strings.Repeat("n", 1100+i%5*200))
		items = append(items, it)
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, items
}

// TestEncryptedTamperedCLI changes a sealed block of an encrypted segment,
// checksum fixed, at each of its blocks in turn: cat, verify and verify
// --salvage with the key report the block as damaged (exit status 3), and
// go on with every other record. Without the key the checksums hold, and
// verify says it checked only those.
func TestEncryptedTamperedCLI(t *testing.T) {
	a := genIdentity(t)
	ka := keyFile(t, a)
	dir, items := tamperDump(t, a.Recipient())
	names := areaNames(t, dir, sink.AreaReady)
	path := filepath.Join(dir, names[0])
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r0, err := segment.NewReader(bytes.NewReader(orig), int64(len(orig)), nil)
	if err != nil {
		t.Fatal(err)
	}
	blocks := r0.Footer().Blocks
	if len(blocks) < 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	for i, blk := range blocks {
		data := bytes.Clone(orig)
		tamperBlock(data, blk)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r := cli(t, exitDamage, "cat", dir, "--identity", ka)
		if got, want := len(payloads(t, r.stdout)), len(items)-int(blk.Count); got != want {
			t.Fatalf("block %d tampered: cat printed %d records, want %d", i, got, want)
		}
		if !strings.Contains(r.stderr, names[0]) || !strings.Contains(r.stderr, "fails authentication") {
			t.Fatalf("block %d tampered: cat: %s", i, r)
		}
		r = cli(t, exitDamage, "verify", dir, "--identity", ka)
		if !strings.Contains(r.stdout, "DAMAGED "+names[0]) || !strings.Contains(r.stdout, "fails authentication") ||
			linesStarting(r.stdout, "ok ") != len(names)-1 {
			t.Fatalf("block %d tampered: verify: %s", i, r)
		}
		salv := t.TempDir()
		r = cli(t, exitDamage, "verify", dir, "--identity", ka, "--salvage", salv)
		if !strings.Contains(r.stdout, "salvaged ") {
			t.Fatalf("block %d tampered: verify --salvage: %s", i, r)
		}
		sr := cli(t, 0, "verify", salv, "--identity", ka)
		if !strings.Contains(sr.stdout, "ok ") {
			t.Fatalf("block %d tampered: the salvaged segment: %s", i, sr)
		}
		r = cli(t, 0, "verify", dir)
		if !strings.Contains(r.stdout, "checksums only") {
			t.Fatalf("block %d tampered: verify without the key: %s", i, r)
		}
	}
}

// linesStarting counts the lines of s that start with prefix.
func linesStarting(s, prefix string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}
