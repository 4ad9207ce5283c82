package fs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// recoverKey is the data key of the encrypted segments Recover is given;
// Recover itself has no key.
var recoverKey = &segment.DataKey{Key: bytes.Repeat([]byte{9}, segment.KeySize), Wrapped: []byte("wrapped")}

type recoverKeys struct{}

func (recoverKeys) UnwrapKey(context.Context, []byte) ([]byte, error) { return recoverKey.Key, nil }

// encryptedOpen writes an encrypted segment of n records, unsealed, as a
// Queue that died leaves it (".NAME.open"), and returns its name and the
// offsets of its blocks.
func encryptedOpen(t *testing.T, dir string, n int) (string, []int64, []byte) {
	t.Helper()
	now := time.Now()
	hdr := segment.Header{Codec: segment.CodecZstd, Created: now, ID: segment.NewID(now)}
	name := segment.FileName(now, hdr.ID)
	var buf bytes.Buffer
	w, err := segment.NewWriter(&buf, hdr, &segment.WriterOptions{Key: recoverKey, BlockSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for i := range n {
		if i%10 == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			offs = append(offs, w.Size())
		}
		if err := w.Add(now, nil, bytes.Repeat([]byte{byte('a' + i%26)}, 40)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	if err := os.WriteFile(filepath.Join(dir, "."+name+".open"), data, 0o640); err != nil {
		t.Fatal(err)
	}
	return name, offs, data
}

func countRecords(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Keys: recoverKeys{}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err == nil {
			n++
		}
	}
}

// TestRecoverEncrypted: Recover, which has no key, seals an encrypted
// segment left open by its checksums, and keeps a damaged one with intact
// blocks after the damage whole in quarantine (it cannot copy its records
// out), rather than cutting those blocks off.
func TestRecoverEncrypted(t *testing.T) {
	dir := t.TempDir()
	intact, _, _ := encryptedOpen(t, dir, 50)
	damaged, offs, data := encryptedOpen(t, dir, 50)
	data[offs[1]+segment.BlockHeaderSize+3] ^= 1
	if err := os.WriteFile(filepath.Join(dir, "."+damaged+".open"), data, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := (&fs.Writer{Directory: dir}).Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, filepath.Join(dir, intact)); n != 50 {
		t.Fatalf("sealed segment holds %d records, want 50", n)
	}
	if _, err := os.Stat(filepath.Join(dir, damaged)); err == nil {
		t.Fatal("the damaged encrypted segment was published cut short")
	}
	q, err := os.ReadFile(filepath.Join(dir, fs.QuarantineDir, damaged))
	if err != nil {
		t.Fatalf("the damaged encrypted segment is not in quarantine: %v", err)
	}
	if !bytes.Equal(q, data) {
		t.Fatal("the quarantined segment lost bytes")
	}
}
