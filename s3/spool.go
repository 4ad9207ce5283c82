package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// spool holds committed segments until the uploader has stored them. The
// uploader starts their uploads in commit order, at most uploads at once;
// a segment leaves the spool once it and every segment committed before it
// are stored, so the held ones are always the last committed (see
// sink.BacklogWatcher).
type spool struct {
	store
	fsw     *fs.Writer // nil: memory spool
	limit   int64
	wait    time.Duration
	uploads int // segments uploaded at once

	backlog atomic.Int64

	mu       sync.Mutex
	items    []*item
	started  int             // items[:started] were handed to an upload
	queued   map[string]bool // area/name of the items, to add spooled files once
	changed  chan struct{}   // closed and replaced when items change
	closed   bool
	lastErr  error
	uploaded uint64
	pushed   uint64 // items queued so far
	popped   uint64 // items done so far (uploaded, or gone from the spool directory)
	stopped  bool   // the uploader has ended

	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// item is a committed segment waiting for upload.
type item struct {
	name   string
	area   sink.Area
	reason string
	size   int64
	data   []byte // memory spool
	path   string // spool directory
	crc    string
	qid    string // key in spool.queued, set by push
	stored bool   // uploaded (or gone from the spool directory): it leaves with those before it
}

func (it *item) id() string { return it.area.String() + "/" + it.name }

// uncertainLocked returns how many held items S3 may have already: those
// handed to an upload (the oldest), stored or not.
func (st *spool) uncertainLocked() int {
	return st.started
}

// drain waits until the items pushed up to *target are done (uploaded, in
// order), or all of them when target is nil.
func (st *spool) drain(ctx context.Context, target *uint64) error {
	for {
		st.mu.Lock()
		upTo := st.pushed
		if target != nil {
			upTo = *target
		}
		left, ch, last, stopped := upTo-min(st.popped, upTo), st.changed, st.lastErr, st.stopped
		st.mu.Unlock()
		if left == 0 {
			return nil
		}
		if stopped {
			return fmt.Errorf("dlqdump: s3: %d segments (%d bytes in the spool) not uploaded to s3://%s/%s: %w", left, st.backlog.Load(), st.bucket, st.prefix, dlqdump.ErrClosed)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			err := fmt.Errorf("dlqdump: s3: %d segments (%d bytes in the spool) not yet uploaded to s3://%s/%s: %w", left, st.backlog.Load(), st.bucket, st.prefix, ctx.Err())
			if last != nil {
				err = fmt.Errorf("%w; last upload error: %w", err, last)
			}
			return err
		}
	}
}

func (st *spool) notifyLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// waitRoom waits until size more bytes fit in the spool, for at most
// SpoolWait.
func (st *spool) waitRoom(ctx context.Context, size int64) error {
	var timeout <-chan time.Time
	if st.wait > 0 {
		t := time.NewTimer(st.wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		st.mu.Lock()
		if st.closed {
			st.mu.Unlock()
			return fmt.Errorf("%w: s3.Writer", dlqdump.ErrClosed)
		}
		used := st.backlog.Load()
		if used == 0 || used+size <= st.limit {
			st.mu.Unlock()
			return nil
		}
		ch, n, last := st.changed, len(st.items), st.lastErr
		st.mu.Unlock()
		full := func(cause error) error {
			err := fmt.Errorf("%w: %d segments (%d bytes) wait for upload to s3://%s/%s, SpoolLimit is %d bytes", ErrSpoolFull, n, used, st.bucket, st.prefix, st.limit)
			if cause != nil {
				err = fmt.Errorf("%w: %w", err, cause)
			}
			if last != nil {
				err = fmt.Errorf("%w; last upload error: %w", err, last)
			}
			return err
		}
		if st.wait < 0 {
			return full(nil)
		}
		select {
		case <-ch:
		case <-timeout:
			return full(nil)
		case <-ctx.Done():
			return full(ctx.Err())
		}
	}
}

// add waits for room and queues it.
func (st *spool) add(ctx context.Context, it *item) error {
	if err := st.waitRoom(ctx, it.size); err != nil {
		return err
	}
	return st.push(it)
}

// push queues it for upload, unless it is queued already. It fails once the
// Writer is closed: the uploader may be gone.
func (st *spool) push(it *item) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return fmt.Errorf("%w: s3.Writer", dlqdump.ErrClosed)
	}
	it.qid = it.id()
	if st.queued[it.qid] {
		return nil
	}
	st.queued[it.qid] = true
	st.items = append(st.items, it)
	st.pushed++
	st.backlog.Add(it.size)
	st.notifyLocked()
	select {
	case st.wake <- struct{}{}:
	default:
	}
	return nil
}

// nextLocked returns the oldest item not handed to an upload yet, nil if
// there is none.
func (st *spool) nextLocked() *item {
	if st.started < len(st.items) {
		it := st.items[st.started]
		st.started++
		return it
	}
	return nil
}

// next returns the oldest item not handed to an upload, waiting for one; nil
// when stopped.
func (st *spool) next() *item {
	for {
		st.mu.Lock()
		it := st.nextLocked()
		st.mu.Unlock()
		if it != nil {
			return it
		}
		select {
		case <-st.wake:
		case <-st.ctx.Done():
			return nil
		}
	}
}

// markStored marks an item stored and lets the stored items at the head of
// the spool leave it.
func (st *spool) markStored(it *item, uploaded bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	it.stored = true
	it.data = nil // its memory is no longer needed; its size counts until it leaves
	if uploaded {
		st.uploaded++
		st.lastErr = nil
	}
	for len(st.items) > 0 && st.items[0].stored {
		head := st.items[0]
		st.items[0] = nil
		st.items = st.items[1:]
		st.started--
		delete(st.queued, head.qid)
		st.backlog.Add(-head.size)
		st.popped++
	}
	st.notifyLocked()
}

// run is the uploader: it hands the items, in order, to at most uploads
// goroutines, each uploading one until it is stored, until stopped.
func (st *spool) run() {
	defer close(st.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, st.uploads)
	for {
		select {
		case slots <- struct{}{}:
		case <-st.ctx.Done():
			return
		}
		it := st.next()
		if it == nil {
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			uploaded, err := st.upload(it)
			if err != nil {
				return // stopped
			}
			st.markStored(it, uploaded)
		})
	}
}

// upload stores it, retrying until it succeeds or the spool is stopped.
// uploaded is false for an item whose spool file vanished.
func (st *spool) upload(it *item) (uploaded bool, err error) {
	ctx := st.ctx
	for attempt := 1; ; attempt++ {
		err := st.uploadOnce(ctx, it)
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if errors.Is(err, os.ErrNotExist) && it.path != "" {
			st.log.Error("a spooled segment vanished from the spool directory before it was uploaded", slog.String("segment", it.name), slog.String("path", it.path), slog.Any("error", err))
			return false, nil
		}
		if errors.Is(err, ErrConflict) {
			old := it.name
			it.name = renamed(it.name)
			st.log.Warn("another object exists under the segment's name; uploading it under a new name", slog.String("segment", old), slog.String("new_name", it.name), slog.Any("error", err))
			continue
		}
		st.mu.Lock()
		st.lastErr = err
		st.mu.Unlock()
		d := st.retry.backoff(attempt)
		st.log.Warn("uploading a segment failed; it stays in the spool and is retried", slog.String("segment", it.name),
			slog.Int("attempt", attempt), slog.Duration("wait", d), slog.Int64("backlog", st.backlog.Load()), slog.Any("error", err))
		if err := backoff.Sleep(ctx, d); err != nil {
			return false, err
		}
	}
}

func (st *spool) uploadOnce(ctx context.Context, it *item) error {
	key, err := st.key(it.area, it.name)
	if err != nil {
		return err
	}
	u := &upload{key: key, size: it.size, crc: it.crc}
	if it.reason != "" {
		u.meta = map[string]string{MetaReason: encodeReason(it.reason)}
	}
	if it.data != nil || it.path == "" {
		u.body = bytesReaderAt(it.data)
	} else {
		f, err := os.Open(it.path)
		if err != nil {
			return err
		}
		defer f.Close()
		u.body = f
	}
	if u.crc == "" {
		if u.crc, err = checksum(u.body, u.size); err != nil {
			return fmt.Errorf("dlqdump: s3: read spooled segment %s: %w", it.name, err)
		}
		it.crc = u.crc
	}
	if err := st.put(ctx, u, true); err != nil {
		return err
	}
	st.log.Debug("segment uploaded", slog.String("segment", it.name), slog.String("key", key), slog.Int64("bytes", it.size))
	if it.path != "" {
		if err := os.Remove(it.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			st.log.Warn("removing an uploaded segment from the spool directory failed", slog.String("path", it.path), slog.Any("error", err))
		}
		if it.area == sink.AreaQuarantine {
			_ = os.Remove(it.path + reasonSuffix)
		}
	}
	return nil
}

// renamed returns a new name for a segment whose name is taken: the same
// time, new random bits.
func renamed(name string) string {
	if t, ok := segment.ParseFileName(name); ok {
		return segment.FileName(t, segment.NewID(t))
	}
	return strings.TrimSuffix(name, segment.Ext) + "-" + newToken()[:16] + segment.Ext
}

// reasonSuffix ends the file fs.Writer keeps beside a quarantined segment.
const reasonSuffix = ".reason"

// scan queues the sealed segments in the spool directory that are not queued
// yet, oldest first: ready ones, then quarantined ones.
func (st *spool) scan() error {
	dir := st.fsw.Directory
	var errs []error
	for _, sub := range []struct {
		dir  string
		area sink.Area
	}{{dir, sink.AreaReady}, {filepath.Join(dir, fs.QuarantineDir), sink.AreaQuarantine}} {
		entries, err := os.ReadDir(sub.dir)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("dlqdump: s3: scan spool directory: %w", err))
			}
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || checkName(e.Name()) != nil {
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // removed meanwhile
			}
			it := &item{name: e.Name(), area: sub.area, size: info.Size(), path: filepath.Join(sub.dir, e.Name())}
			if sub.area == sink.AreaQuarantine {
				if b, err := os.ReadFile(it.path + reasonSuffix); err == nil {
					it.reason = strings.TrimSpace(string(b))
				}
			}
			st.mu.Lock()
			known := st.queued[it.id()]
			st.mu.Unlock()
			if !known {
				st.log.Info("uploading a segment left in the spool directory", slog.String("segment", it.name), slog.String("area", it.area.String()), slog.Int64("bytes", it.size))
				if err := st.push(it); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}
