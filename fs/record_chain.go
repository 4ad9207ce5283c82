package fs

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// The files of one record (records.go): a chain from NAME.claim, each file
// naming its successor, the last one holding the record unless it was made
// by a breaker that did not write it yet.

// breakAfter is how long a write waits for the lock of a record file held by
// someone else (held for a read and a small write when all is well) before
// it breaks it by making the file's successor: a process stopped holding it
// delays the record's writes by that much, and blocks nothing else.
var breakAfter = time.Second

// sealWait bounds how long a reader waits for the maker of a successor to
// write it (settle).
var sealWait = time.Second

// maxChain bounds a record's files (one more per lock broken or legacy file
// replaced): a chain that long is damaged.
const maxChain = 1000

// legacyNext ends the name of the successor of a file without a header.
const legacyNext = "@legacy"

// gen is one file of a record's chain, open.
type gen struct {
	f        recordFile
	name     string // its name in the records directory
	base     string // the name of the chain's first file
	writable bool   // open for writing
	loaded   bool   // its header was read: current and next are known
	current  bool   // it has a header: written in place by this version
	next     string // the name of its successor
	// pre holds what the read of the header read of slot 0 too, for the
	// next read of its slots (nil once used, or when it may be stale).
	pre *[]byte
}

func (g *gen) close() {
	g.dropPre()
	_ = g.f.Close()
}

func (g *gen) dropPre() {
	if g.pre != nil {
		peekPool.Put(g.pre)
		g.pre = nil
	}
}

// openGen opens the file name of the record whose first file is base, for
// reading and, with write, writing if it can be; with load, it reads its
// header.
func openGen(dir, base, name string, write, load bool) (*gen, error) {
	path := filepath.Join(dir, name)
	f, err := openRecordFile(path, write)
	writable := write && err == nil
	if write && errors.Is(err, os.ErrPermission) {
		f, err = openRecordFile(path, false)
	}
	if err != nil {
		return nil, err
	}
	g := &gen{f: f, name: name, base: base, writable: writable}
	if load {
		if err := g.load(); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	return g, nil
}

// load reads g's header, and with it the start of slot 0 (kept in pre).
func (g *gen) load() error {
	g.dropPre()
	bp := peekPool.Get().(*[]byte)
	n, err := g.f.ReadAt((*bp)[:current.base+slotPeek], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		peekPool.Put(bp)
		return err
	}
	g.loaded = true
	if id, ok := parseHeader((*bp)[:n]); ok {
		g.current, g.next = true, g.base+"@"+hex.EncodeToString(id[:])
		*bp = (*bp)[:n]
		g.pre = bp
	} else {
		g.current, g.next = false, g.name+legacyNext
		peekPool.Put(bp)
	}
	return nil
}

// slots reads g's newest whole slot, from what load read first if it is
// there (and not stale: stable reads only use what was read under the
// lock).
func (g *gen) slots(lay layout, stable bool) (slot, bool, error) {
	var pre []byte
	if g.pre != nil {
		pre = (*g.pre)[min(len(*g.pre), int(current.base)):]
	}
	cur, ok, err := readSlots(g.f, lay, stable, pre)
	g.dropPre()
	return cur, ok, err
}

// chain is a record's files from the first on, open.
type chain []*gen

func (c chain) close() {
	for _, g := range c {
		g.close()
	}
}

func (c chain) last() *gen { return c[len(c)-1] }

// walk opens the files of the record whose first file is base, following
// successors to the last. A missing first file is os.ErrNotExist.
func walk(dir, base string) (chain, error) {
	var c chain
	name := base
	for {
		g, err := openGen(dir, base, name, false, true)
		if errors.Is(err, os.ErrNotExist) && len(c) > 0 {
			return c, nil
		}
		if err != nil {
			c.close()
			return nil, err
		}
		if c = append(c, g); len(c) > maxChain {
			c.close()
			return nil, fmt.Errorf("record %s: more than %d files", base, maxChain)
		}
		name = g.next
	}
}

// record returns the record of the chain: the newest whole slot of the last
// file that has one (none: a tombstone or an empty legacy file); stableLast
// tells that nobody writes the last file during the read.
func (c chain) record(stableLast bool) (data []byte, none bool, err error) {
	for i := len(c) - 1; i >= 0; i-- {
		g := c[i]
		lay := legacy
		if g.current {
			lay = current
		}
		// Files before the last may still be written by a holder whose
		// lock was broken: read them as if written to.
		cur, ok, err := g.slots(lay, !g.current || (stableLast && i == len(c)-1))
		switch {
		case err != nil:
			return nil, false, err
		case ok:
			return cur.data, cur.data == nil, nil
		case g.current:
			continue // a successor not written yet: the record is before it
		}
		b, err := readWhole(g.f)
		if errors.Is(err, os.ErrNotExist) {
			return nil, true, nil
		}
		return b, false, err
	}
	// No file with a whole slot: the first one is damaged; its bytes are
	// the record, which the claim protocol takes over as damaged.
	b, err := readWhole(c[0].f)
	if errors.Is(err, os.ErrNotExist) {
		return nil, true, nil
	}
	return b, false, err
}

// settle waits until the last file of c holds a record, or until nobody
// holds its lock, for up to sealWait (or ctx). A file made to break a lock
// is written by its maker right after it is linked, holding its lock: until
// then the record is not the one before it, which a write of the holder
// whose lock was broken may still change. A reader that waits sees the
// maker's record; one that does not, for a maker stopped in between, may see
// that write, as a write reported unsure may be seen.
func (c chain) settle(ctx context.Context) error {
	g := c.last()
	if !g.current {
		return nil
	}
	deadline := time.Now().Add(sealWait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		_, ok, err := g.slots(current, false)
		if err != nil || ok {
			return err
		}
		locked, err := tryLock(g.f)
		if err != nil {
			return err
		}
		if locked { // its maker is gone, or done: look once more
			_ = unlock(g.f)
			_, _, err := g.slots(current, false)
			return err
		}
		if !time.Now().Before(deadline) {
			return nil
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
			return ctx.Err()
		}
	}
}

// waitLock takes the lock of g, waiting for it for up to breakAfter (false:
// it stayed held), or until ctx is done.
func waitLock(ctx context.Context, g *gen) (bool, error) {
	deadline := time.Now().Add(breakAfter)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		ok, err := tryLock(g.f)
		if err != nil || ok {
			return ok, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
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
			return false, ctx.Err()
		}
	}
}

// newID returns a random successor id.
func newID() [idSize]byte {
	var id [idSize]byte
	_, _ = crand.Read(id[:]) // never fails on supported platforms
	return id
}

// create makes name in dir, holding a header and, unless data is nil, the
// record data in slot 0, unless a file of that name exists (os.ErrExist).
// The file is written whole under a temporary name (synced first with sync)
// and linked into place, so nobody sees it in part. With lock, the new file
// is returned open and locked, else closed (nil).
func (r *Reader) create(dir, base, name string, data []byte, lock, sync bool) (*gen, error) {
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%x.tmp", base, mrand.Uint64()))
	f, err := createRecordFile(tmp, r.perm())
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(tmp) }()
	// Locked while it is written: a listing removes a temporary file
	// whose lock is free once it is staleTemp old (its writer was killed).
	if ok, lerr := tryLock(f); lerr != nil || !ok {
		_ = f.Close()
		if lerr == nil {
			lerr = fmt.Errorf("lock %s: held by another", tmp)
		}
		return nil, lerr
	}
	id := newID()
	b := appendHeader(make([]byte, 0, current.base+slotHeaderSize+int64(len(data))), id)
	if data != nil {
		b = b[:current.base]
		b = appendSlot(b, 1, data)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil && sync {
		err = syncRecord(f)
	}
	if err == nil && lock {
		var ok bool
		if ok, err = tryLock(f); err == nil && !ok {
			err = fmt.Errorf("lock %s: held by another", tmp)
		}
	}
	if err == nil {
		err = os.Link(tmp, filepath.Join(dir, name))
	}
	if err != nil || !lock {
		_ = f.Close()
		return nil, err
	}
	return &gen{f: f, name: name, base: base, writable: true, loaded: true, current: true, next: base + "@" + hex.EncodeToString(id[:])}, nil
}
