package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Records are files in DIR/.claims, one chain of files per segment name:
// NAME.claim, then, rarely, its successors NAME.claim@ID. Each file names
// its successor in its header, written once when the file is made
// (record_slots.go); the record is the newest whole slot of the last file
// that has one. Reads take no lock: a read walks to the last file, reads it,
// and checks that it still has no successor (else it reads again). A write
// takes an flock on the last file,
// for one read and one small write into the slot that does not hold the
// record; its own record only, never the directory. The version of a record
// is a hash of its bytes.
//
// A process can stop holding that lock (SIGSTOP, a VM paused, a GC pause) and
// go on at any time. So that it blocks nothing for long, a write that finds
// the lock held for breakAfter (1s) breaks it: it makes the file's successor,
// written whole under a temporary name, locked, and linked into place (a link
// fails if the name exists, so one breaker wins), reads the record, and
// writes its own into the successor. The stopped process blocked only its
// own record, for breakAfter; every later write goes to the successor. When
// it goes on, its write lands in the old file, which nobody reads once the
// successor holds a record, and it reports that the write may not have taken
// effect: after writing, a write checks that its file still has no successor
// and that NAME.claim is still linked, and reports success only then.
//
// Why that is a compare-and-swap. Files are made only by link of a complete
// file under a name nobody made before (a random 128-bit id each), so each
// file has at most one successor ever, and a chain only grows at its end.
// Within one file, writes are serialized by its lock, and each reads the
// record after taking the lock and after checking that the file has no
// successor. A breaker reads the record only after its successor is linked;
// so a write into the old file that reported success finished before the
// link (it found no successor after it finished), hence before the breaker's
// read: the breaker sees it. A write into the old file that finishes after
// the link reports failure (not ErrConflict: it may have been read by the
// breaker, or by others before the successor held a record). So every
// write reported successful read the record left by the previous one and
// replaced it; none is lost, and no two succeed from one version. A record
// is removed by writing a tombstone, the same way, and then, while the last
// file's lock is held and it still has no successor, by unlinking NAME.claim
// and then the rest; a write finding NAME.claim unlinked, and no successor
// (so its lock was not broken: the record was removed before it took it),
// wrote where nobody reads and starts again. What remains: a process stopped
// between that last check and its unlink, for longer than breakAfter, while
// another process writes the removed record anew, removes that new record;
// and a reader does not wait for the maker of a successor (which holds its
// lock until it wrote it) for longer than sealWait (1s): a maker stopped
// between linking its file and writing it lets readers see, meanwhile, the
// file before it, where a write reported unsure (the broken holder's) may
// have landed after the link. The claim protocol, which reads the record
// after a failed write, copes with both: at worst, a holder stopped twice so
// delivers one block more twice.
//
// A record is synced (fdatasync, and the directory) by the first write of it
// a Reader makes and then whenever its last sync is older than syncEvery (1s):
// after the machine loses power, a record goes back by at most that much (a
// restore repeats what it delivered in that second, and the block it was
// in), at the cost of one sync a second per segment being restored.

const recordSuffix = ".claim"

// testHookLocked, set by tests, runs when a write holds its lock.
var testHookLocked func()

// testHookCreate, set by tests, runs when a write that found no record is
// about to create its first file (lost false), and when it found one there
// then (lost true).
var testHookCreate func(lost bool)

// errUnsure means a write finished after its lock was broken, or after the
// record was removed: it may or may not have taken effect.
var errUnsure = errors.New("the write may not have taken effect: its lock was broken while it wrote (the process stalled for longer than a lock is held)")

// errRestart means the record was removed while a write waited: it starts
// again.
var errRestart = errors.New("the record was removed meanwhile")

// space is a directory of records: the segments' claim records
// (ClaimsDir), or a table's (TablesDir/NAME).
type space struct {
	sub   string             // under the Directory
	check func(string) error // the names it holds
}

var claimsSpace = space{sub: ClaimsDir, check: checkName}

func (r *Reader) recordsDir(sp space) (string, error) {
	if r.Directory == "" {
		return "", fmt.Errorf("%w: fs.Reader.Directory: required", sink.ErrConfig)
	}
	return filepath.Join(r.Directory, sp.sub), nil
}

// recordBase returns the directory of sp and the name of the first file of
// name's record there.
func (r *Reader) recordBase(sp space, name string) (dir, base string, err error) {
	if err := sp.check(name); err != nil {
		return "", "", err
	}
	dir, err = r.recordsDir(sp)
	return dir, name + recordSuffix, err
}

func recordVersion(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ReadRecord returns the record of name and its version.
func (r *Reader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	return r.readRecord(ctx, claimsSpace, name)
}

func (r *Reader) readRecord(ctx context.Context, sp space, name string) ([]byte, string, error) {
	dir, base, err := r.recordBase(sp, name)
	if err != nil {
		return nil, "", err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		c, err := walk(dir, base)
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
		}
		if err != nil {
			return nil, "", fmt.Errorf("dlqdump: fs: read record: %w", err)
		}
		err = c.settle(ctx)
		var b []byte
		var none bool
		if err == nil {
			b, none, err = c.record(false)
		}
		// A successor made since the walk: what was read of the last
		// file may be a write made after it, which does not count.
		var moved bool
		if err == nil {
			moved, err = present(dir, c.last().next)
		}
		c.close()
		switch {
		case (moved || errors.Is(err, errRecordBusy)) && attempt < 10:
			continue
		case moved:
			err = errRecordBusy
		case err != nil:
			return nil, "", fmt.Errorf("dlqdump: fs: read record of %s: %w", name, err)
		case none:
			// A tombstone: a removal stopped before its unlinks (a
			// crash). Finish it (that write fails harmlessly where the
			// directory is read-only), so that the name is no longer
			// listed.
			_, _ = r.change(ctx, sp, name, nil, "")
			return nil, "", fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
		}
		return b, recordVersion(b), nil
	}
}

// WriteRecord stores data as the record of name if its version is ifVersion
// ("" : if there is none).
func (r *Reader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	return r.writeRecord(ctx, claimsSpace, name, data, ifVersion)
}

func (r *Reader) writeRecord(ctx context.Context, sp space, name string, data []byte, ifVersion string) (string, error) {
	if len(data) == 0 || len(data) > sink.MaxRecordSize {
		return "", fmt.Errorf("dlqdump: fs: record of %s: %d bytes (want 1 to %d)", name, len(data), sink.MaxRecordSize)
	}
	return r.change(ctx, sp, name, data, ifVersion)
}

// DeleteRecord removes the record of name if its version is ifVersion.
func (r *Reader) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	_, err := r.change(ctx, claimsSpace, name, nil, ifVersion)
	return err
}

// change writes data as the record of name, or removes it (data nil), if its
// version is ifVersion ("": if there is none).
func (r *Reader) change(ctx context.Context, sp space, name string, data []byte, ifVersion string) (string, error) {
	dir, base, err := r.recordBase(sp, name)
	if err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		first, err := openGen(dir, base, base, true, false)
		switch {
		case errors.Is(err, os.ErrNotExist) && data == nil:
			return "", fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
		case errors.Is(err, os.ErrNotExist) && ifVersion != "":
			return "", fmt.Errorf("%w: record of %s: it is gone", sink.ErrConflict, name)
		case errors.Is(err, os.ErrNotExist):
			err = r.createFirst(dir, base, data)
			if errors.Is(err, os.ErrExist) && testHookCreate != nil {
				testHookCreate(true)
			}
			if errors.Is(err, os.ErrExist) && attempt < 3 {
				continue // made meanwhile: decide on it
			}
			if errors.Is(err, os.ErrExist) {
				// Made by others each time this write looked, and
				// removed again by its next look: nothing written, as
				// when another's record is there first.
				return "", fmt.Errorf("%w: record of %s: made by another writer meanwhile, %d times", sink.ErrConflict, name, attempt+1)
			}
			if err != nil {
				return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
			}
			return recordVersion(data), nil
		case err != nil:
			return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
		}
		v, err := r.changeChain(ctx, dir, base, chain{first}, name, data, ifVersion)
		if errors.Is(err, errRestart) && attempt < 3 {
			continue
		}
		if err == errRestart { //nolint:errorlint // the bare sentinel: removed, nothing else failed
			// Removed while this write waited and made again by
			// others before its next look, each time: nothing
			// written.
			return "", fmt.Errorf("%w: record of %s: removed and made again by other writers meanwhile, %d times", sink.ErrConflict, name, attempt+1)
		}
		if errors.Is(err, errUnsure) {
			return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
		}
		return v, err
	}
}

// createFirst makes the first file of a record holding data.
func (r *Reader) createFirst(dir, base string, data []byte) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	// A successor of an earlier file of this name without a header, left
	// by an interrupted removal, must not become this file's.
	if err := os.Remove(filepath.Join(dir, base+legacyNext)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	sync, _ := r.syncs.due(filepath.Join(dir, base))
	if testHookCreate != nil {
		testHookCreate(false)
	}
	if _, err := r.create(dir, base, base, data, false, sync); err != nil {
		return err
	}
	if sync {
		if err := syncDir(dir); err != nil {
			return err
		}
		r.syncs.done(filepath.Join(dir, base))
	}
	return nil
}

// changeChain does change's work on the record's files c, which it closes.
func (r *Reader) changeChain(ctx context.Context, dir, base string, c chain, name string, data []byte, ifVersion string) (string, error) {
	defer func() { c.close() }()
	c, fresh, err := r.lockLast(ctx, dir, base, c)
	if err != nil {
		return "", err
	}
	if testHookLocked != nil {
		testHookLocked()
	}
	first := filepath.Join(dir, base)
	last := c.last()
	var cur slot
	var hasCur bool
	if !fresh {
		if cur, hasCur, err = last.slots(current, true); err != nil {
			return "", fmt.Errorf("dlqdump: fs: read record of %s: %w", name, err)
		}
	}
	old, none := cur.data, cur.data == nil
	if !hasCur {
		if old, none, err = c.record(true); err != nil {
			return "", fmt.Errorf("dlqdump: fs: read record of %s: %w", name, err)
		}
	}
	var conflict string
	switch {
	case data == nil && none:
		// A removal stopped between its tombstone and its unlinks (a
		// crash): finish it, so that the record is no longer listed.
		r.unlinkRemoved(dir, base, c)
		return "", fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	case data == nil && ifVersion == "":
		conflict = "no version given"
	case ifVersion == "" && !none:
		conflict = "it exists"
	case ifVersion != "" && none:
		conflict = "it is gone"
	case ifVersion != "" && recordVersion(old) != ifVersion:
		conflict = "it changed"
	}
	if conflict != "" {
		if fresh { // the successor made to break a lock holds the record from now on
			_ = writeSlot(last.f, current, 0, 1, old)
		}
		return "", fmt.Errorf("%w: record of %s: %s", sink.ErrConflict, name, conflict)
	}
	index, seq := 0, uint64(1)
	if hasCur {
		index, seq = 1-cur.index, cur.seq+1
	}
	// made: a file was linked by this write. A sequence at its end goes
	// on in a successor.
	made := fresh
	if hasCur && cur.seq == math.MaxUint64 {
		g, err := r.create(dir, base, last.next, nil, true, false)
		if err != nil {
			return "", errors.Join(errRestart, err) // nothing written
		}
		c = append(c, g)
		last, index, seq, made = g, 0, 1, true
	}
	if err := writeSlot(last.f, current, index, seq, data); err != nil {
		return "", fmt.Errorf("dlqdump: fs: write record of %s: %w", name, err)
	}
	if due, first := r.syncs.due(filepath.Join(dir, base)); data != nil && due {
		// The directory too when the file may be new to the disk.
		if err := syncRecord(last.f); err != nil {
			return "", fmt.Errorf("dlqdump: fs: sync record of %s: %w", name, errors.Join(errUnsure, err))
		}
		if first || made {
			if err := syncDir(dir); err != nil {
				return "", fmt.Errorf("dlqdump: fs: sync record of %s: %w", name, errors.Join(errUnsure, err))
			}
		}
		r.syncs.done(filepath.Join(dir, base))
	}
	// Fenced off while it wrote? A record removed before the lock was
	// taken (its first file unlinked, no successor: the lock was not
	// broken) was written to in vain, where nobody reads: start again.
	if there, err := present(dir, last.next); err != nil || there {
		return "", errors.Join(errUnsure, err)
	}
	if ok, err := linked(c[0].f, first); err != nil {
		return "", errors.Join(errUnsure, err)
	} else if !ok {
		return "", errRestart
	}
	if data != nil {
		return recordVersion(data), nil
	}
	r.unlinkRemoved(dir, base, c)
	return "", nil
}

// unlinkRemoved unlinks the files c of a removed record (its last file
// holds the tombstone, under the caller's lock), the first one first,
// unless the lock was broken meanwhile. A file that stays (an error) holds
// the tombstone: the next removal or read of the record unlinks it.
func (r *Reader) unlinkRemoved(dir, base string, c chain) {
	r.syncs.forget(filepath.Join(dir, base))
	if there, err := present(dir, c.last().next); err != nil || there {
		return
	}
	if err := os.Remove(filepath.Join(dir, base)); err != nil {
		return
	}
	for _, g := range c[1:] {
		_ = os.Remove(filepath.Join(dir, g.name))
	}
}

// lockLast locks the last file of the record whose files start with c, for
// a write, and returns the files up to it: the successors it found, or a
// successor it made (fresh, holding no record yet) because the last file's
// lock stayed held for breakAfter or the last file is not written in place
// (legacy, or not writable).
func (r *Reader) lockLast(ctx context.Context, dir, base string, c chain) (_ chain, fresh bool, err error) {
	for {
		g := c.last()
		locked := false
		if g.writable {
			if locked, err = tryLock(g.f); err != nil {
				return c, false, err
			}
		}
		// Read under the lock, what load reads of slot 0 is current.
		if err := g.load(); err != nil {
			return c, false, err
		}
		if locked && !g.current {
			_ = unlock(g.f) // not written in place
			locked = false
		}
		there := false
		if !locked && g.current && g.writable {
			// Held by a writer of this file, or by one stopped in it;
			// or the file is not the last. Wait, and then break the
			// lock, unless it is not the last.
			g.dropPre()
			if there, err = present(dir, g.next); err != nil {
				return c, false, err
			}
			if !there {
				if locked, err = waitLock(ctx, g); err != nil {
					return c, false, err
				}
			}
		}
		switch {
		case locked:
			if there, err = present(dir, g.next); err != nil || !there {
				return c, false, err
			}
			_ = unlock(g.f)
		case !there:
			ng, err := r.create(dir, base, g.next, nil, true, false)
			if err == nil {
				return append(c, ng), true, nil
			}
			if !errors.Is(err, os.ErrExist) {
				return c, false, err
			}
			// Another made it first: go on to it.
		}
		next, err := openGen(dir, base, g.next, true, false)
		if errors.Is(err, os.ErrNotExist) {
			return c, false, errRestart // the record was removed
		}
		if err != nil {
			return c, false, err
		}
		if c = append(c, next); len(c) > maxChain {
			return c, false, fmt.Errorf("record %s: more than %d files", base, maxChain)
		}
	}
}

// RecordNames lists the names with a record, sorted.
func (r *Reader) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return r.recordNames(ctx, claimsSpace)
}

func (r *Reader) recordNames(ctx context.Context, sp space) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		dir, err := r.recordsDir(sp)
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
			if staleTempFile(dir, e) {
				continue
			}
			n, ok := strings.CutSuffix(e.Name(), recordSuffix)
			if !ok || !e.Type().IsRegular() || sp.check(n) != nil {
				continue
			}
			if !yield(n, nil) {
				return
			}
		}
	}
}

// staleTemp is how old a record's temporary file must be, its lock free,
// for a listing to remove it: its writer was killed between making it and
// linking it into place (a `dlqdump job create` killed there left one).
var staleTemp = time.Minute

// staleTempFile removes e, in dir, if it is a record's temporary file whose
// writer is gone, and reports whether it was one.
func staleTempFile(dir string, e os.DirEntry) bool {
	n := e.Name()
	if !strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".tmp") || !e.Type().IsRegular() {
		return false
	}
	if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) >= staleTemp {
		_, _ = removeIfStale(filepath.Join(dir, n))
	}
	return true
}
