//go:build unix

package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Records locked by someone else (another process, or here another open
// file) make a compare-and-swap fail after a bounded wait, without writing;
// a cancelled context ends the wait; once the lock is free, it works.
func TestRecordsLockedTooLong(t *testing.T) {
	defer func(d time.Duration) { lockWait = d }(lockWait)
	lockWait = 100 * time.Millisecond
	dir := t.TempDir()
	rd := &Reader{Directory: dir}
	ctx := t.Context()
	name := newSegment(t, dir)
	v, err := rd.WriteRecord(ctx, name, []byte("first"), "")
	if err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(filepath.Join(dir, ClaimsDir))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if ok, err := tryLock(held); !ok || err != nil {
		t.Fatalf("tryLock = %v, %v", ok, err)
	}
	if _, err := rd.WriteRecord(ctx, name, []byte("second"), v); !errors.Is(err, errLockBusy) || errors.Is(err, sink.ErrConflict) {
		t.Fatalf("WriteRecord while the records are locked = %v, want a busy error, not a conflict", err)
	}
	if err := rd.DeleteRecord(ctx, name, v); !errors.Is(err, errLockBusy) {
		t.Fatalf("DeleteRecord while the records are locked = %v, want a busy error", err)
	}
	// Reads need no lock.
	if b, got, err := rd.ReadRecord(ctx, name); err != nil || string(b) != "first" || got != v {
		t.Fatalf("ReadRecord while the records are locked = %q, %q, %v", b, got, err)
	}
	lockWait = time.Hour
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := rd.WriteRecord(cctx, name, []byte("second"), v); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteRecord with a context that times out = %v", err)
	}
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	v2, err := rd.WriteRecord(ctx, name, []byte("second"), v)
	if err != nil {
		t.Fatalf("WriteRecord once the lock is free: %v", err)
	}
	if err := rd.DeleteRecord(ctx, name, v2); err != nil {
		t.Fatal(err)
	}
}
