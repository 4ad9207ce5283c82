package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// writeSegment writes a sealed segment of n records in small blocks into
// sw and returns its footer's block index.
func writeSegment(t *testing.T, sw sink.SegmentWriter, n int) []segment.BlockInfo {
	t.Helper()
	var buf bytes.Buffer
	created := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	w, err := segment.NewWriter(&buf, segment.Header{Codec: segment.CodecNone, Created: created, ID: segment.NewID(created)}, &segment.WriterOptions{BlockSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Add(created, nil, []byte(fmt.Sprintf("record %03d %s", i, strings.Repeat("x", 80)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	r, err := segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Footer().Blocks
}

// records counts the records and damaged blocks of the published segments
// of dir.
func publishedRecords(t *testing.T, dir string) (records, damaged int, names []string) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	for _, p := range paths {
		names = append(names, filepath.Base(p))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := segment.NewReader(bytes.NewReader(b), int64(len(b)), nil)
		if err != nil {
			damaged++
			continue
		}
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				damaged++
				var ce *segment.CorruptError
				if !errors.As(err, &ce) {
					break
				}
				continue
			}
			records++
		}
	}
	return records, damaged, names
}

// failSyncOnce makes the first fsync fail with EIO after running drop (what
// the kernel throws away of the pages it could not write); later ones work.
func failSyncOnce(t *testing.T, drop func(f *os.File)) *int {
	t.Helper()
	calls := 0
	testHookSync = func(f *os.File) error {
		calls++
		if calls == 1 {
			if drop != nil {
				drop(f)
			}
			return syscall.EIO
		}
		return datasync(f)
	}
	t.Cleanup(func() { testHookSync = nil })
	return &calls
}

// Issue 11 follow-up: in buffered mode the only fsync is Commit's. When it
// failed, the kernel may have dropped the blocks it could not write, and the
// retried Commit's fsync succeeded without them: the segment was published
// with blocks missing and nothing said so. Now Commit reads the file back
// after a failed fsync, publishes what is intact and returns an error
// wrapping ErrLost that counts the records lost (the Queue counts it as a
// failure and logs it); the retry returns nil.
func TestCommitAfterFailedSyncCountsLostRecords(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Directory: dir}
	ctx := context.Background()
	name := segment.FileName(time.Now(), segment.NewID(time.Now()))
	sw, err := w.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	blocks := writeSegment(t, sw, n)
	if len(blocks) < 4 {
		t.Fatalf("%d blocks, want several", len(blocks))
	}
	lostBlock := blocks[2] // in the middle: blocks after it are intact
	failSyncOnce(t, func(f *os.File) {
		zeros := make([]byte, 64)
		if _, err := f.WriteAt(zeros, lostBlock.Offset); err != nil {
			t.Error(err)
		}
	})
	if err := sw.Commit(ctx); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first Commit = %v, want the fsync's EIO", err)
	}
	err = sw.Commit(ctx)
	if !errors.Is(err, ErrLost) {
		t.Fatalf("Commit retried after the failed fsync = %v, want an error wrapping ErrLost", err)
	}
	want := fmt.Sprintf("%d of its %d records", lostBlock.Count, n)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Commit's error %q does not count the loss (%q)", err, want)
	}
	if err := sw.Commit(ctx); err != nil {
		t.Fatalf("Commit retried after ErrLost = %v, want nil", err)
	}
	records, damaged, names := publishedRecords(t, dir)
	if damaged != 0 || records != n-int(lostBlock.Count) {
		t.Fatalf("published %v: %d records, %d damaged blocks; want the %d intact ones and no damage", names, records, damaged, n-int(lostBlock.Count))
	}
	if q, _ := filepath.Glob(filepath.Join(dir, QuarantineDir, "*"+segment.Ext)); len(q) != 1 {
		t.Fatalf("quarantine holds %q, want the damaged original", q)
	}
}

// A failed fsync whose data did reach the disk (nothing dropped) publishes
// the segment whole on the retry.
func TestCommitAfterFailedSyncPublishesIntactSegment(t *testing.T) {
	dir := t.TempDir()
	w := &Writer{Directory: dir}
	ctx := context.Background()
	name := segment.FileName(time.Now(), segment.NewID(time.Now()))
	sw, err := w.Create(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	writeSegment(t, sw, 30)
	failSyncOnce(t, nil)
	if err := sw.Commit(ctx); !errors.Is(err, syscall.EIO) {
		t.Fatalf("first Commit = %v, want EIO", err)
	}
	if err := sw.Commit(ctx); err != nil {
		t.Fatalf("Commit retried = %v, want nil", err)
	}
	if records, damaged, names := publishedRecords(t, dir); records != 30 || damaged != 0 || len(names) != 1 || names[0] != name {
		t.Fatalf("published %v: %d records, %d damaged", names, records, damaged)
	}
}
