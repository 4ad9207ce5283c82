package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Writer publishes segments into a directory. Use it as dlqdump.Config.Writer:
//
//	&fs.Writer{Directory: "/var/lib/app/dlq"}
type Writer struct {
	// Directory holds the segments; it is created if missing. Required.
	Directory string
	// Perm is the permission of new files. Default 0640.
	Perm os.FileMode
	// Logger receives recovery reports. Default: discard.
	Logger *slog.Logger

	// aside is where Recover moves damaged files, relative to Directory:
	// QuarantineDir when empty. Reader.Recover sets it to "." for the
	// quarantine directory itself.
	aside string
}

var (
	_ dlqdump.Writer = (*Writer)(nil)
	_ sink.Recoverer = (*Writer)(nil)
)

func (w *Writer) perm() os.FileMode {
	if w.Perm == 0 {
		return defaultPerm
	}
	return w.Perm
}

// asideDir returns where Recover moves damaged files, relative to Directory.
func (w *Writer) asideDir() string {
	if w.aside == "" {
		return QuarantineDir
	}
	return w.aside
}

func (w *Writer) logger() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
}

func (w *Writer) dir() (string, error) {
	if w.Directory == "" {
		return "", fmt.Errorf("%w: fs.Writer.Directory: required", dlqdump.ErrConfig)
	}
	if err := os.MkdirAll(w.Directory, 0o750); err != nil {
		return "", fmt.Errorf("dlqdump: fs: create directory: %w", err)
	}
	return w.Directory, nil
}

// Create starts the segment name in a locked temporary file.
//
// Recover (in this process or another) removes an empty temporary file whose
// lock is free, and the lock can only be taken once the file exists: a
// Recover that comes in between removes the file under Create. So Create,
// once it holds the lock, checks that the name still leads to the file it
// locked, and starts over with a new file when a Recover took the first one;
// it never hands out a segment on an unlinked file.
func (w *Writer) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir, err := w.dir()
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, tempName(name))
	for attempt := 1; ; attempt++ {
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, w.perm())
		if err != nil {
			if attempt > 1 && attempt <= createAttempts && errors.Is(err, os.ErrExist) {
				// Our previous file, which a Recover holds and is
				// removing.
				if err := backoff.Sleep(ctx, createWait<<min(attempt-2, 6)); err != nil {
					return nil, fmt.Errorf("dlqdump: fs: create segment %s: %w", name, err)
				}
				continue
			}
			return nil, fmt.Errorf("dlqdump: fs: create segment: %w", err)
		}
		if testHookCreated != nil {
			testHookCreated(tmp)
		}
		locked, err := tryLock(f)
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp) // ours: created exclusively, and nobody holds its lock
			return nil, fmt.Errorf("dlqdump: fs: lock %s: %w", tmp, err)
		}
		if locked && sameFile(f, tmp) {
			return &file{w: w, f: f, dir: dir, tmp: tmp, final: filepath.Join(dir, name)}, nil
		}
		// A Recover holds the lock of the empty file and removes it, or
		// removed it already: leave it to that Recover and start over.
		_ = f.Close()
		if attempt >= createAttempts {
			return nil, fmt.Errorf("dlqdump: fs: create segment %s: a Recover removed its temporary file %d times", name, attempt)
		}
	}
}

// createAttempts bounds the temporary files Create makes for one segment
// when Recovers keep taking them, and createWait is the first wait for a
// Recover to finish removing one (doubling, up to 64 times as long).
const (
	createAttempts = 20
	createWait     = time.Millisecond
)

// testHookCreated, when set by a test, runs between creating a segment's
// temporary file and locking it.
var testHookCreated func(tmp string)

// file is a segment being written.
type file struct {
	w          *Writer
	f          *os.File
	dir        string
	tmp, final string
	off        int64
	dirSynced  bool
	syncFailed bool // an fsync of f failed: the page cache may have dropped blocks
	committed  bool // renamed to its final name (or what survived of it published)
	released   bool // f is closed
}

// ErrLost means records were lost: an fsync of a segment failed, the kernel
// dropped what it could not write, and a later fsync reported success
// without it. The error says how many records, and what was published
// instead.
var ErrLost = errors.New("dlqdump: fs: records lost")

// testHookSync, when set by a test, runs instead of fdatasync in Sync and
// Commit.
var testHookSync func(f *os.File) error

// fsync is fdatasync, or the test's hook.
func fsync(f *os.File) error {
	if testHookSync != nil {
		return testHookSync(f)
	}
	return datasync(f)
}

// Write writes p at the segment's current end.
func (f *file) Write(p []byte) (int, error) {
	n, err := f.f.WriteAt(p, f.off)
	f.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("dlqdump: fs: write %s: %w", f.tmp, err)
	}
	return n, nil
}

// Sync makes the bytes written so far, and the file's name, durable.
func (f *file) Sync() error {
	if err := fsync(f.f); err != nil {
		f.syncFailed = true
		return fmt.Errorf("dlqdump: fs: sync %s: %w", f.tmp, err)
	}
	if !f.dirSynced {
		if err := syncDir(f.dir); err != nil {
			return err
		}
		f.dirSynced = true
	}
	return nil
}

// Truncate cuts the file to size bytes; the next Write goes there.
func (f *file) Truncate(size int64) error {
	if err := f.f.Truncate(size); err != nil {
		return fmt.Errorf("dlqdump: fs: truncate %s: %w", f.tmp, err)
	}
	f.off = size
	return nil
}

// Commit syncs the file, renames it to its final name and syncs the
// directory. The lock is held until the rename is durable, so Recover in
// another process never sees the file half-committed. A Commit retried after
// a failure finishes what is left; after a success it does nothing.
//
// Once an fsync of the file failed, a later one may succeed although the
// kernel dropped the blocks it could not write: before publishing, Commit
// then reads the file back. If blocks are missing it publishes what is
// intact (as Recover does: cut back and sealed, or copied into a new
// segment with the file moved to quarantine), logs an error and returns one
// wrapping ErrLost that counts the records lost, so that the Queue counts a
// failure; a retry of that Commit returns nil.
func (f *file) Commit(context.Context) error {
	if f.released {
		if f.committed {
			return nil
		}
		return fmt.Errorf("dlqdump: fs: commit %s: %w", f.tmp, os.ErrClosed)
	}
	if !f.committed {
		if err := fsync(f.f); err != nil {
			f.syncFailed = true
			return fmt.Errorf("dlqdump: fs: sync %s: %w", f.tmp, err)
		}
		if f.syncFailed {
			if err := f.verify(); err != nil {
				return err
			}
		}
		if err := renameNoReplace(f.tmp, f.final); err != nil {
			return fmt.Errorf("dlqdump: fs: publish %s: %w", f.final, err)
		}
		f.committed = true
	}
	if err := syncDir(f.dir); err != nil {
		return err
	}
	f.released = true
	if err := f.f.Close(); err != nil {
		return fmt.Errorf("dlqdump: fs: close %s: %w", f.final, err)
	}
	return nil
}

// verify reads back a file whose fsync failed once. It returns nil when
// every block is intact. Otherwise it publishes what is intact, releases the
// file and returns an error wrapping ErrLost that counts the records lost
// (from the footer, when it survived); an error that is not damage (the file
// could not be read) is returned as it is, and Commit may be retried.
func (f *file) verify() error {
	name := filepath.Base(f.final)
	st, err := f.f.Stat()
	if err != nil {
		return fmt.Errorf("dlqdump: fs: check %s after a failed fsync: %w", f.tmp, err)
	}
	size := st.Size()
	res, err := segment.Scan(f.f, size, &segment.ReaderOptions{Name: name})
	var ce *segment.CorruptError
	switch {
	case err == nil && res.Sealed && res.Damage == nil:
		return nil // every block reached the disk
	case err != nil && !errors.As(err, &ce):
		return fmt.Errorf("dlqdump: fs: check %s after a failed fsync: %w", f.tmp, err)
	}
	total, known := uint64(0), false
	if r, rerr := segment.NewReader(f.f, size, &segment.ReaderOptions{Name: name}); rerr == nil && r.Sealed() {
		total, known = r.Footer().Records, true
	}
	pub, kept, perr := f.w.publishIntact(f.dir, f.f, f.tmp, name, size, "commit after a failed fsync", "damaged after a failed fsync")
	if perr != nil {
		return fmt.Errorf("dlqdump: fs: segment %s lost blocks after a failed fsync, and publishing its intact records failed: %w", name, perr)
	}
	f.committed, f.released = true, true
	_ = f.f.Close()
	lost := "an unknown number of records (its footer, which counts them, is damaged too)"
	if known {
		lost = fmt.Sprintf("%d of its %d records", total-min(kept, total), total)
	}
	what := "nothing of it was published"
	if pub != "" {
		what = fmt.Sprintf("its %d intact records are published as %s", kept, pub)
	}
	cause := err // the header's damage
	if cause == nil {
		cause = res.Damage
	}
	f.w.logger().Error("records lost: an fsync of a segment failed and a later one succeeded without the blocks the kernel dropped",
		slog.String("segment", name), slog.String("lost", lost), slog.String("published", pub), slog.Uint64("kept", kept), slog.Any("damage", cause))
	return fmt.Errorf("%w: segment %s: an fsync failed and a later one succeeded without the blocks the kernel dropped: %s lost; %s (damage: %v)",
		ErrLost, name, lost, what, cause)
}

// Close releases the file (and its lock) without publishing it; Recover
// seals it later. After Commit, or a second time, it does nothing.
func (f *file) Close() error {
	if f.released {
		return nil
	}
	f.released = true
	return f.f.Close()
}

// Abort removes the temporary file. A committed segment stays published.
func (f *file) Abort() error {
	var err error
	if !f.released {
		f.released = true
		err = f.f.Close()
	}
	if f.committed {
		return err
	}
	if rerr := os.Remove(f.tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
