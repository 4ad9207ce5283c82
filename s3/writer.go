package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Defaults of the spool fields.
const (
	// DefaultSpoolLimit bounds the memory spool.
	DefaultSpoolLimit = 64 * dlqdump.Megabyte
	// DefaultDirSpoolLimit bounds a spool directory.
	DefaultDirSpoolLimit = dlqdump.Gigabyte
	// DefaultSpoolWait is how long Commit waits for room in a full spool.
	DefaultSpoolWait = time.Second
)

// Writer publishes segments to an S3 bucket under Prefix. Use it as
// dlqdump.Config.Writer:
//
//	w := &s3.Writer{Client: client, Bucket: "dead-letters", Prefix: "orders/"}
//	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 32 * dlqdump.Megabyte})
//	...
//	err = q.Close() // returns once every segment is uploaded
//
// The Queue owns the Writer: Queue.Flush waits for the upload of what it
// flushed (Flush), and Queue.Close and Shutdown close the Writer (Close), so
// they return only when every committed segment is in the bucket, or say
// what is not. There is no need to close the Writer yourself; doing so again
// after the Queue is harmless.
//
// A segment is built in a buffer (memory, or a file in SpoolDir) and, on
// Commit, handed to a bounded spool; one background goroutine uploads the
// spool in order, each segment with a single PutObject, or a multipart upload
// (parallel parts, aborted on failure) above MultipartThreshold. So an S3
// outage or slow request never blocks the Queue's writer loop: it shows as
// Backlog, which the Queue counts in Rate and in its backpressure, and once
// the spool is full Commit fails after SpoolWait so the Queue keeps the data
// and retries. Uploads are retried until they succeed or the Writer is
// closed; nothing is dropped.
//
// Every upload is conditional (If-None-Match: *), so a retried upload never
// overwrites an object or makes a second copy; an attempt that finds its own
// earlier, successful attempt (same size and MetaChecksum) counts as done.
//
// Durable mode (dlqdump.Config.Durable) needs SpoolDir: the Queue's Sync then
// makes the records durable in the spool directory, and they are uploaded
// afterwards, after a crash by Recover. Without SpoolDir, NewQueue refuses a
// Durable config (CheckDurable), and a crash loses the segments not yet
// uploaded (at most the open segment and the spool).
//
// The fields are read when the Writer is first used and must not change
// afterwards. A Writer must not be copied after first use.
type Writer struct {
	// Client is the S3 client. Build it with the credential chain, region
	// and, for S3-compatible servers, BaseEndpoint and UsePathStyle (see
	// the package example). Required.
	Client *awss3.Client
	// Bucket is the bucket, which must exist. Required.
	Bucket string
	// Prefix is put before every key, e.g. "dlq/orders/". Default "".
	Prefix string

	// SpoolDir, when set, is a local directory where segments are written
	// and kept until uploaded, so they survive a restart (Recover uploads
	// them) and Durable mode works. It is laid out like an fs.Writer
	// directory. Default "": segments are held in memory.
	SpoolDir string
	// SpoolLimit bounds the bytes of committed segments waiting for upload.
	// A segment is always taken when the spool is empty. Default
	// DefaultSpoolLimit (64 MiB) in memory, DefaultDirSpoolLimit (1 GiB)
	// with SpoolDir.
	SpoolLimit dlqdump.MemorySize
	// SpoolWait is how long Commit waits for room in a full spool before
	// failing with ErrSpoolFull (also bounded by Commit's context).
	// Negative: do not wait. Default DefaultSpoolWait (1s).
	SpoolWait time.Duration

	// MultipartThreshold is the size above which a segment is uploaded in
	// parts. Default DefaultMultipartThreshold (16 MiB).
	MultipartThreshold dlqdump.MemorySize
	// PartSize is the size of the parts, at least 5 MiB. Default
	// DefaultPartSize (8 MiB).
	PartSize dlqdump.MemorySize
	// PartConcurrency is how many parts are uploaded at once. Default
	// DefaultPartConcurrency (4).
	PartConcurrency int

	// Retry says how failed S3 calls are retried. Default: see Retry.
	Retry Retry
	// Logger receives upload failures and recovery reports; never
	// payloads or credentials. Default: discard.
	Logger *slog.Logger

	mu       sync.Mutex
	st       *spool
	closed   bool
	closeErr chan error // the first Close's result, once it is known
}

var (
	_ sink.Writer            = (*Writer)(nil)
	_ sink.Recoverer         = (*Writer)(nil)
	_ sink.BacklogWatcher    = (*Writer)(nil)
	_ sink.Flusher           = (*Writer)(nil)
	_ sink.Closer            = (*Writer)(nil)
	_ sink.DurabilityChecker = (*Writer)(nil)
)

// spool holds committed segments until the uploader has stored them.
type spool struct {
	store
	fsw   *fs.Writer // nil: memory spool
	limit int64
	wait  time.Duration

	backlog atomic.Int64

	mu       sync.Mutex
	items    []*item
	queued   map[string]bool // area/name of the items, to add spooled files once
	changed  chan struct{}   // closed and replaced when items change
	closed   bool
	lastErr  error
	uploaded uint64
	pushed   uint64 // items queued so far
	popped   uint64 // items done so far (uploaded, or gone from the spool directory)
	tried    bool   // an upload of the head item was attempted: S3 may have it
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
}

func (it *item) id() string { return it.area.String() + "/" + it.name }

// state returns the spool, starting it on first use.
func (w *Writer) state() (*spool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, fmt.Errorf("%w: s3.Writer", dlqdump.ErrClosed)
	}
	if w.st != nil {
		return w.st, nil
	}
	if err := checkConfig("Writer", w.Client, w.Bucket); err != nil {
		return nil, err
	}
	st := &spool{
		store:   store{client: oneAttemptClient(w.Client), bucket: w.Bucket, prefix: w.Prefix, retry: w.Retry.withDefaults(), log: newLogger(w.Logger).With(slog.String("component", "dlqdump.s3.Writer"))},
		limit:   int64(w.SpoolLimit),
		wait:    w.SpoolWait,
		queued:  map[string]bool{},
		changed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	st.setUpload(int64(w.MultipartThreshold), int64(w.PartSize), w.PartConcurrency)
	if st.wait == 0 {
		st.wait = DefaultSpoolWait
	}
	if w.SpoolDir != "" {
		if err := os.MkdirAll(w.SpoolDir, 0o750); err != nil {
			return nil, fmt.Errorf("dlqdump: s3: create SpoolDir: %w", err)
		}
		st.fsw = &fs.Writer{Directory: w.SpoolDir, Logger: w.Logger}
		if st.limit <= 0 {
			st.limit = int64(DefaultDirSpoolLimit)
		}
	} else if st.limit <= 0 {
		st.limit = int64(DefaultSpoolLimit)
	}
	st.ctx, st.cancel = context.WithCancel(context.Background())
	if st.fsw != nil {
		if err := st.scan(); err != nil {
			st.cancel()
			return nil, err
		}
	}
	go st.run()
	w.st = st
	return st, nil
}

// Create starts the segment name. Its bytes are buffered in memory or in a
// file in SpoolDir until Commit hands it to the upload spool.
func (w *Writer) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	st, err := w.state()
	if err != nil {
		return nil, err
	}
	if st.fsw == nil {
		return &memSegment{name: name, commit: func(ctx context.Context, data []byte) error {
			return st.add(ctx, &item{name: name, size: int64(len(data)), data: data})
		}, sync: errNoSpoolDir}, nil
	}
	sw, err := st.fsw.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &dirSegment{sw: sw, st: st, name: name}, nil
}

var errNoSpoolDir = fmt.Errorf("%w: s3.Writer.SpoolDir: Durable mode needs a spool directory; without one a segment is only in memory until it is uploaded", dlqdump.ErrConfig)

// CheckDurable returns an error wrapping dlqdump.ErrConfig, naming
// s3.Writer.SpoolDir, when SpoolDir is not set: without it a segment cannot
// be synced. dlqdump.NewQueue calls it for a Durable Queue.
func (w *Writer) CheckDurable() error {
	if w.SpoolDir == "" {
		return errNoSpoolDir
	}
	return nil
}

// Recover uploads what an earlier process left in SpoolDir: it seals and
// spools the segments left open by a crash (as fs.Writer.Recover does, and
// returns their names) and queues every sealed segment not yet uploaded,
// quarantined ones to the quarantine prefix with their reason. dlqdump.NewQueue
// calls it. Without SpoolDir there is nothing to recover.
func (w *Writer) Recover(ctx context.Context) ([]string, error) {
	st, err := w.state()
	if err != nil {
		return nil, err
	}
	if st.fsw == nil {
		return nil, nil
	}
	names, err := st.fsw.Recover(ctx)
	if serr := st.scan(); serr != nil {
		err = errors.Join(err, serr)
	}
	return names, err
}

// Backlog returns the bytes of committed segments not yet uploaded. It
// implements sink.Backlogger.
func (w *Writer) Backlog() int64 {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	if st == nil {
		return 0
	}
	return st.backlog.Load()
}

// WatchBacklog returns the committed segments not yet uploaded, their bytes,
// whether they survive a restart (with SpoolDir), the last upload failure,
// and a channel closed at the next change. Segments are uploaded in the
// order they were committed. It implements sink.BacklogWatcher.
func (w *Writer) WatchBacklog() sink.Backlog {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	if st == nil {
		return sink.Backlog{Persistent: w.SpoolDir != "", Changed: neverChanges}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return sink.Backlog{Segments: len(st.items), Bytes: st.backlog.Load(), Uncertain: st.uncertainLocked(),
		Persistent: st.fsw != nil, Stopped: st.stopped, LastError: st.lastErr, Changed: st.changed}
}

// uncertainLocked returns how many held items S3 may have already: the head,
// once an upload of it was attempted.
func (st *spool) uncertainLocked() int {
	if st.tried && len(st.items) > 0 {
		return 1
	}
	return 0
}

// neverChanges is the Changed channel of a Writer not started: its backlog
// stays empty until the Queue commits a segment.
var neverChanges = make(chan struct{})

// WriterStats are a Writer's counters.
type WriterStats struct {
	// Spooled is the number of committed segments not yet uploaded, and
	// Backlog their bytes.
	Spooled int
	Backlog int64
	// Uploaded is the number of segments uploaded.
	Uploaded uint64
	// LastError is the last upload failure; nil after a success.
	LastError error
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	if st == nil {
		return WriterStats{}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return WriterStats{Spooled: len(st.items), Backlog: st.backlog.Load(), Uploaded: st.uploaded, LastError: st.lastErr}
}

// Flush waits until every segment committed before the call is uploaded, or
// ctx is done; then the error counts those not uploaded yet. Queue.Flush
// calls it. It implements sink.Flusher.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	st := w.st
	w.mu.Unlock()
	if st == nil {
		return nil
	}
	st.mu.Lock()
	target := st.pushed
	st.mu.Unlock()
	return st.drain(ctx, &target)
}

// Close stops taking segments, waits until the spool is uploaded or ctx is
// done, and stops the uploader. If ctx ends first, the error counts the
// segments not uploaded: with SpoolDir they stay there and are uploaded by
// Recover on the next start; in memory they are lost. A Commit waiting for
// room in the spool meanwhile fails with an error wrapping ErrClosed.
// Queue.Close and Shutdown call it, after the Queue's last Commit. Later
// calls wait for the first one and return its result, so closing the Writer
// again after the Queue does no harm. It implements sink.Closer.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		ch := w.closeErr
		w.mu.Unlock()
		select {
		case err := <-ch:
			ch <- err
			return err
		case <-ctx.Done():
			return fmt.Errorf("dlqdump: s3: close: the first Close has not returned: %w", ctx.Err())
		}
	}
	w.closed = true
	w.closeErr = make(chan error, 1)
	st := w.st
	w.mu.Unlock()
	err := w.close(ctx, st)
	w.closeErr <- err
	return err
}

func (w *Writer) close(ctx context.Context, st *spool) error {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	st.closed = true
	st.notifyLocked()
	st.mu.Unlock()
	err := st.drain(ctx, nil)
	st.cancel()
	<-st.done
	st.mu.Lock()
	st.stopped = true
	st.notifyLocked()
	st.mu.Unlock()
	if err == nil {
		return nil
	}
	st.mu.Lock()
	n, b, unsure := len(st.items), st.backlog.Load(), st.uncertainLocked()
	st.mu.Unlock()
	if st.fsw != nil {
		return fmt.Errorf("dlqdump: s3: close: %d segments (%d bytes) not uploaded; they stay in %s and are uploaded on the next start: %w", n, b, w.SpoolDir, err)
	}
	var what []string
	if n > unsure {
		what = append(what, fmt.Sprintf("%d segments held in memory were not uploaded and are lost", n-unsure))
	}
	if unsure > 0 {
		what = append(what, fmt.Sprintf("%d segment whose upload was under way may or may not be stored", unsure))
	}
	return fmt.Errorf("dlqdump: s3: close: %s (%d bytes): %w", strings.Join(what, "; "), b, err)
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

// head returns the oldest item, waiting for one; nil when stopped.
func (st *spool) head() *item {
	for {
		st.mu.Lock()
		if len(st.items) > 0 {
			it := st.items[0]
			st.mu.Unlock()
			return it
		}
		st.mu.Unlock()
		select {
		case <-st.wake:
		case <-st.ctx.Done():
			return nil
		}
	}
}

// pop removes the uploaded head item.
func (st *spool) pop(it *item, uploaded bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.items[0] = nil
	st.items = st.items[1:]
	delete(st.queued, it.qid)
	st.backlog.Add(-it.size)
	st.popped++
	st.tried = false
	if uploaded {
		st.uploaded++
		st.lastErr = nil
	}
	st.notifyLocked()
}

// run is the uploader: it uploads the items in order until stopped.
func (st *spool) run() {
	defer close(st.done)
	for {
		it := st.head()
		if it == nil {
			return
		}
		uploaded, err := st.upload(it)
		if err != nil {
			return // stopped
		}
		st.pop(it, uploaded)
	}
}

// upload stores it, retrying until it succeeds or the spool is stopped.
// uploaded is false for an item whose spool file vanished.
func (st *spool) upload(it *item) (uploaded bool, err error) {
	ctx := st.ctx
	for attempt := 1; ; attempt++ {
		st.mu.Lock()
		st.tried = true
		st.mu.Unlock()
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

// memSegment is a segment built in memory.
type memSegment struct {
	name      string
	buf       []byte
	commit    func(ctx context.Context, data []byte) error
	sync      error
	committed bool
	aborted   bool
}

// Write appends p to the buffer.
func (m *memSegment) Write(p []byte) (int, error) {
	if m.committed || m.aborted {
		return 0, fmt.Errorf("dlqdump: s3: write to segment %s after Commit or Abort", m.name)
	}
	m.buf = append(m.buf, p...)
	return len(p), nil
}

// Sync cannot make a memory buffer durable.
func (m *memSegment) Sync() error {
	if m.sync != nil {
		return fmt.Errorf("dlqdump: s3: sync segment %s: %w", m.name, m.sync)
	}
	return nil
}

// Truncate cuts the buffer to size bytes.
func (m *memSegment) Truncate(size int64) error {
	if size < 0 || size > int64(len(m.buf)) {
		return fmt.Errorf("dlqdump: s3: truncate segment %s to %d bytes: it has %d", m.name, size, len(m.buf))
	}
	m.buf = m.buf[:size]
	return nil
}

// Commit hands the buffer on (to the spool, or to an upload); it can be
// retried after a failure.
func (m *memSegment) Commit(ctx context.Context) error {
	if m.committed {
		return nil
	}
	if m.aborted {
		return fmt.Errorf("dlqdump: s3: commit segment %s after Abort", m.name)
	}
	if err := m.commit(ctx, m.buf); err != nil {
		return err
	}
	m.committed = true
	m.buf = nil
	return nil
}

// Abort drops the buffer.
func (m *memSegment) Abort() error {
	m.aborted = true
	m.buf = nil
	return nil
}

// dirSegment is a segment built in a file of the spool directory.
type dirSegment struct {
	sw        sink.SegmentWriter // fs.Writer's
	st        *spool
	name      string
	size      int64
	fsDone    bool // committed into the spool directory
	committed bool
}

// Write appends p to the spool file.
func (d *dirSegment) Write(p []byte) (int, error) {
	n, err := d.sw.Write(p)
	d.size += int64(n)
	return n, err
}

// Sync makes the bytes durable in the spool directory.
func (d *dirSegment) Sync() error { return d.sw.Sync() }

// Truncate cuts the spool file to size bytes.
func (d *dirSegment) Truncate(size int64) error {
	if err := d.sw.Truncate(size); err != nil {
		return err
	}
	d.size = size
	return nil
}

// Commit waits for room in the spool, publishes the file in the spool
// directory and queues it for upload.
func (d *dirSegment) Commit(ctx context.Context) error {
	if d.committed {
		return nil
	}
	if !d.fsDone {
		if err := d.st.waitRoom(ctx, d.size); err != nil {
			return err
		}
		if err := d.sw.Commit(ctx); err != nil {
			return err
		}
		d.fsDone = true
	}
	if err := d.st.push(&item{name: d.name, size: d.size, path: filepath.Join(d.st.fsw.Directory, d.name)}); err != nil {
		return fmt.Errorf("dlqdump: s3: segment %s is in the spool directory, to be uploaded on the next start: %w", d.name, err)
	}
	d.committed = true
	return nil
}

// Abort removes the spool file, unless it is committed already.
func (d *dirSegment) Abort() error {
	if d.fsDone {
		return fmt.Errorf("dlqdump: s3: abort segment %s: already committed to the spool", d.name)
	}
	return d.sw.Abort()
}

// Close releases the file without publishing it; Recover seals it later.
func (d *dirSegment) Close() error {
	if c, ok := d.sw.(interface{ Close() error }); ok && !d.fsDone {
		return c.Close()
	}
	return nil
}

// bytesReaderAt reads a byte slice.
type bytesReaderAt []byte

// ReadAt implements io.ReaderAt.
func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("dlqdump: s3: negative offset")
	}
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
