package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Records are files in DIR/.claims, one per segment name (NAME.dlq.claim).
// A record is created whole through a temporary file renamed into place and
// replaced by one write into the slot of the file that does not hold it
// (record_slots.go), so a reader always finds a complete one; every
// compare-and-swap runs under an exclusive flock on the .claims directory,
// held for one read and one small write. The version of a record is a hash
// of its bytes. Records are not synced: they survive the process being
// killed, not necessarily the machine losing power (a record that goes back
// in time makes a restorer repeat work, never skip it).

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
	cur, _, err := readRecordRetrying(path)
	return cur.data, err
}

// readRecordRetrying reads a record file, again when it finds no whole slot:
// a reader not holding the lock may read both slots while they are written
// one after the other.
func readRecordRetrying(path string) (cur slot, slotted bool, err error) {
	for range 3 {
		cur, slotted, err = readRecordSlots(path)
		if !errors.Is(err, errTornRecord) {
			break
		}
	}
	return cur, slotted, err
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
	if errors.Is(err, errRecordBusy) {
		unlock, lerr := r.lockRecords(ctx)
		if lerr != nil {
			return nil, "", lerr
		}
		b, err = readRecordFile(path)
		unlock()
	}
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
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case err == nil:
		defer f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	cur, slotted, err := r.checkVersion(f, path, name, ifVersion)
	if err != nil {
		return "", err
	}
	if f != nil && slotted {
		if err := writeSlot(f, cur, data); err != nil {
			return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
		}
		return recordVersion(data), nil
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, appendSlot(nil, 1, data), r.perm()); err != nil {
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	return recordVersion(data), nil
}

// checkVersion checks, under the lock, that the record in f (the file at
// path; nil: none) has version ifVersion ("": none).
func (r *Reader) checkVersion(f *os.File, path, name, ifVersion string) (cur slot, slotted bool, err error) {
	err = os.ErrNotExist
	if f != nil {
		cur, slotted, err = readSlots(f, path, true)
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		if ifVersion != "" {
			return cur, slotted, fmt.Errorf("%w: record of %s: it is gone", sink.ErrConflict, name)
		}
		return cur, slotted, nil
	case err != nil:
		return cur, slotted, fmt.Errorf("dlqdump: fs: read record: %w", err)
	case ifVersion == "":
		return cur, slotted, fmt.Errorf("%w: record of %s: it exists", sink.ErrConflict, name)
	case recordVersion(cur.data) != ifVersion:
		return cur, slotted, fmt.Errorf("%w: record of %s", sink.ErrConflict, name)
	}
	return cur, slotted, nil
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
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("dlqdump: fs: read record: %w", err)
	}
	defer f.Close()
	if _, _, err := readSlots(f, path, true); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	if ifVersion == "" {
		return fmt.Errorf("%w: record of %s: no version given", sink.ErrConflict, name)
	}
	if _, _, err := r.checkVersion(f, path, name, ifVersion); err != nil {
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
