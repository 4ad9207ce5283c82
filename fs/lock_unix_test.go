//go:build unix

package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// A record whose lock stays held by someone else (another process, stopped
// in a write; here another open file) is written after breakAfter, into a
// successor of the file the holder locked; a cancelled context ends the wait
// without writing; reads take no lock; and the record is removed whole.
func TestRecordLockHeldIsBroken(t *testing.T) {
	defer func(d time.Duration) { breakAfter = d }(breakAfter)
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	ctx := t.Context()
	name := newSegment(t, dir)
	v, err := rd.WriteRecord(ctx, name, []byte("first"), "")
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.OpenFile(filepath.Join(dir, ClaimsDir, name+recordSuffix), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if ok, err := tryLock(held); !ok || err != nil {
		t.Fatalf("tryLock = %v, %v", ok, err)
	}
	breakAfter = time.Hour
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := rd.WriteRecord(cctx, name, []byte("second"), v); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteRecord with a context that times out = %v", err)
	}
	if b, got, err := rd.ReadRecord(ctx, name); err != nil || string(b) != "first" || got != v {
		t.Fatalf("ReadRecord while the record is locked = %q, %q, %v", b, got, err)
	}
	breakAfter = 50 * time.Millisecond
	v2, err := rd.WriteRecord(ctx, name, []byte("second"), v)
	if err != nil {
		t.Fatalf("WriteRecord once the lock was held for breakAfter: %v", err)
	}
	files, err := os.ReadDir(filepath.Join(dir, ClaimsDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Name() != name+recordSuffix || !strings.HasPrefix(files[1].Name(), name+recordSuffix+"@") {
		t.Fatalf("records directory holds %v, want the first file and its successor", files)
	}
	v3, err := rd.WriteRecord(ctx, name, []byte("third"), v2) // in place in the successor, whose lock is free
	if err != nil {
		t.Fatal(err)
	}
	if b, got, err := rd.ReadRecord(ctx, name); err != nil || string(b) != "third" || got != v3 {
		t.Fatalf("ReadRecord = %q, %q, %v", b, got, err)
	}
	if err := rd.DeleteRecord(ctx, name, v3); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(filepath.Join(dir, ClaimsDir)); len(files) != 0 {
		t.Fatalf("records directory holds %v after the record was removed", files)
	}
	if _, _, err := rd.ReadRecord(ctx, name); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("ReadRecord after DeleteRecord = %v", err)
	}
}
