package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Records are files in DIR/.claims, one per segment name (NAME.dlq.claim).
// A record is replaced whole, through a temporary file renamed over it, so a
// reader always sees a complete one; every compare-and-swap runs under an
// exclusive flock on the .claims directory, held for one read and one small
// write. The version of a record is a hash of its bytes. Records are not
// synced: they survive the process being killed, not necessarily the machine
// losing power (a record that goes back in time makes a restorer repeat
// work, never skip it).

const recordSuffix = ".claim"

// lockWait bounds how long an operation waits for the lock on the records,
// which is only ever held for a read and a small write.
var lockWait = 5 * time.Second

func (r *Reader) recordsDir() (string, error) {
	if r.Directory == "" {
		return "", fmt.Errorf("%w: fs.Reader.Directory: required", sink.ErrConfig)
	}
	return filepath.Join(r.Directory, ClaimsDir), nil
}

func (r *Reader) recordPath(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	dir, err := r.recordsDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name+recordSuffix), nil
}

func recordVersion(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// readRecordFile reads a record; an empty or missing file is none.
func readRecordFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, sink.MaxRecordSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > sink.MaxRecordSize {
		return nil, fmt.Errorf("record %s is larger than %d bytes", path, sink.MaxRecordSize)
	}
	if len(b) == 0 {
		return nil, os.ErrNotExist
	}
	return b, nil
}

// ReadRecord returns the record of name and its version.
func (r *Reader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	path, err := r.recordPath(name)
	if err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	b, err := readRecordFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	if err != nil {
		return nil, "", fmt.Errorf("dlqdump: fs: read record: %w", err)
	}
	return b, recordVersion(b), nil
}

// WriteRecord stores data as the record of name if its version is ifVersion
// ("" : if there is none).
func (r *Reader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	path, err := r.recordPath(name)
	if err != nil {
		return "", err
	}
	if len(data) == 0 || len(data) > sink.MaxRecordSize {
		return "", fmt.Errorf("dlqdump: fs: record of %s: %d bytes (want 1 to %d)", name, len(data), sink.MaxRecordSize)
	}
	unlock, err := r.lockRecords(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := r.checkVersion(path, name, ifVersion); err != nil {
		return "", err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, r.perm()); err != nil {
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	return recordVersion(data), nil
}

// checkVersion checks, under the lock, that the record at path has version
// ifVersion ("": none).
func (r *Reader) checkVersion(path, name, ifVersion string) error {
	cur, err := readRecordFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if ifVersion != "" {
			return fmt.Errorf("%w: record of %s: it is gone", sink.ErrConflict, name)
		}
	case err != nil:
		return fmt.Errorf("dlqdump: fs: read record: %w", err)
	case ifVersion == "":
		return fmt.Errorf("%w: record of %s: it exists", sink.ErrConflict, name)
	case recordVersion(cur) != ifVersion:
		return fmt.Errorf("%w: record of %s", sink.ErrConflict, name)
	}
	return nil
}

// DeleteRecord removes the record of name if its version is ifVersion.
func (r *Reader) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	path, err := r.recordPath(name)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	unlock, err := r.lockRecords(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := readRecordFile(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	if ifVersion == "" {
		return fmt.Errorf("%w: record of %s: no version given", sink.ErrConflict, name)
	}
	if err := r.checkVersion(path, name, ifVersion); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("dlqdump: fs: remove record of %s: %w", name, err)
	}
	return nil
}

// RecordNames lists the names with a record, sorted.
func (r *Reader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		dir, err := r.recordsDir()
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			yield("", err)
			return
		}
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			yield("", fmt.Errorf("dlqdump: fs: list records: %w", err))
			return
		}
		for _, e := range entries {
			n, ok := strings.CutSuffix(e.Name(), recordSuffix)
			if !ok || !e.Type().IsRegular() || checkName(n) != nil {
				continue
			}
			if !yield(n, nil) {
				return
			}
		}
	}
}

// errLockBusy means the records stayed locked for lockWait.
var errLockBusy = errors.New("dlqdump: fs: the claim records stayed locked by another process")

// lockRecords takes the exclusive lock on the records directory, trying every
// millisecond or two for at most lockWait or until ctx is done.
func (r *Reader) lockRecords(ctx context.Context) (unlock func(), err error) {
	dir, err := r.recordsDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("dlqdump: fs: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("dlqdump: fs: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ok, err := tryLock(d)
		if err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("dlqdump: fs: lock %s: %w", dir, err)
		}
		if ok {
			return func() { _ = d.Close() }, nil
		}
		if !time.Now().Before(deadline) {
			_ = d.Close()
			return nil, fmt.Errorf("%w: %s", errLockBusy, dir)
		}
		wait := time.Millisecond + mrand.N(time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			_ = d.Close()
			return nil, ctx.Err()
		}
	}
}
