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
	"sync"
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

// readRecordFile reads a record without the lock; an empty or missing file
// is none. It fails with errTornRecord or errRecordBusy when the record must
// be read under the lock.
func readRecordFile(path string) ([]byte, error) {
	var cur slot
	var err error
	for range 3 { // a file with no whole slot: perhaps two writes during the read
		cur, _, err = readRecordSlots(path)
		if !errors.Is(err, errTornRecord) {
			break
		}
	}
	return cur.data, err
}

// readRecordLocked reads a record under the lock.
func (r *Reader) readRecordLocked(ctx context.Context, path string) ([]byte, error) {
	unlock, err := r.lockRecords(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	f, err := openRecordFile(path, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cur, _, err := readSlots(f, path, true)
	return cur.data, err
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
	if errors.Is(err, errRecordBusy) || errors.Is(err, errTornRecord) {
		b, err = r.readRecordLocked(ctx, path)
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
	// In place when the file can be written; else replaced whole, which
	// only needs the directory to be writable.
	writable := true
	f, err := openRecordFile(path, true)
	if errors.Is(err, os.ErrPermission) {
		writable = false
		f, err = openRecordFile(path, false)
	}
	switch {
	case err == nil:
		defer f.Close()
	case errors.Is(err, os.ErrNotExist):
		f = nil
	default:
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	cur, slotted, err := r.checkVersion(f, path, name, ifVersion)
	if err != nil {
		return "", err
	}
	if f != nil && writable && slotted && inPlace(cur, data) {
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
func (r *Reader) checkVersion(f recordFile, path, name, ifVersion string) (cur slot, slotted bool, err error) {
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
	f, err := openRecordFile(path, false)
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

// lockRecords takes the exclusive lock on the records directory: first the
// process's own for that directory, which its goroutines queue for in order,
// then the flock other processes take, tried every millisecond or two; for
// at most lockWait in all, or until ctx is done.
func (r *Reader) lockRecords(ctx context.Context) (unlock func(), err error) {
	dir, err := r.recordsDir()
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(lockWait)
	defer deadline.Stop()
	local := processLock(dir)
	select {
	case local <- struct{}{}:
	case <-deadline.C:
		return nil, fmt.Errorf("%w: %s", errLockBusy, dir)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d, err := openDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		// Made by the first lock, and again if someone removed it.
		if err = os.MkdirAll(dir, 0o750); err == nil {
			d, err = openDir(dir)
		}
	}
	if err != nil {
		<-local
		return nil, fmt.Errorf("dlqdump: fs: %w", err)
	}
	fail := func(err error) (func(), error) {
		_ = d.Close()
		<-local
		return nil, err
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ok, err := tryLock(d)
		if err != nil {
			return fail(fmt.Errorf("dlqdump: fs: lock %s: %w", dir, err))
		}
		if ok {
			return func() {
				_ = d.Close()
				<-local
			}, nil
		}
		wait := time.Millisecond + mrand.N(time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-deadline.C:
			return fail(fmt.Errorf("%w: %s", errLockBusy, dir))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}

// processLocks holds, for each records directory this process uses, a
// semaphore its goroutines take before the directory's flock.
var processLocks sync.Map // string -> chan struct{}

func processLock(dir string) chan struct{} {
	if l, ok := processLocks.Load(dir); ok {
		return l.(chan struct{})
	}
	l, _ := processLocks.LoadOrStore(dir, make(chan struct{}, 1))
	return l.(chan struct{})
}
