package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
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
	// DefaultUploads is how many segments a Writer uploads at once.
	DefaultUploads = 4
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
// Commit, handed to a bounded spool, from which background goroutines upload
// up to Uploads segments at once, started in commit order, each with a
// single PutObject, or a multipart upload (parallel parts, aborted on
// failure) above MultipartThreshold: a distant bucket's round trips overlap
// instead of adding up. So an S3
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
	// Uploads is how many segments are uploaded at once: their uploads
	// start in commit order, and a segment leaves the spool once it and
	// every segment committed before it are stored, so Flush, Close and
	// the backlog mean what they mean with one at a time. The bytes being
	// uploaded are held in the spool, bounded by SpoolLimit and counted
	// against the Queue's MaxPending. Default DefaultUploads (4).
	Uploads int

	// AbortUploadsAfter is how old, by the server's clock, an unfinished
	// multipart upload of a segment under Prefix must be for Recover to
	// abort it: the uploads of a process that stopped during them (killed,
	// crashed), whose parts S3 keeps, and bills, until they are aborted. A
	// live Writer on the same Prefix whose upload is aborted uploads the
	// segment again, so a value shorter than the longest upload costs a
	// retry, never data; the default keeps every live upload in practice.
	// Negative: abort every one, however recent (tests). Default
	// DefaultAbortUploadsAfter (1h).
	AbortUploadsAfter time.Duration

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
	if st.uploads = w.Uploads; st.uploads <= 0 {
		st.uploads = DefaultUploads
	}
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

// Recover cleans up after an earlier process on the same Prefix and
// SpoolDir; dlqdump.NewQueue calls it.
//
// It aborts the unfinished multipart uploads of segments under Prefix
// initiated at least AbortUploadsAfter ago, judged by the server's clock (see
// AbortUploadsAfter): those of a process killed during an upload, which
// nobody would finish. A failure to list or abort them is logged and not
// returned, so that an S3 outage does not keep a Queue from starting; the
// sweep takes at most 10 seconds. A bucket lifecycle rule
// (AbortIncompleteMultipartUpload) is the backstop for what it leaves.
//
// With SpoolDir it then seals and spools the segments left open by a crash
// (as fs.Writer.Recover does, and returns their names) and queues every
// sealed segment not yet uploaded, quarantined ones to the quarantine prefix
// with their reason.
func (w *Writer) Recover(ctx context.Context) ([]string, error) {
	st, err := w.state()
	if err != nil {
		return nil, err
	}
	after := w.AbortUploadsAfter
	if after == 0 {
		after = DefaultAbortUploadsAfter
	}
	if n, err := st.abortStale(ctx, after); err != nil {
		st.log.Warn("aborting the stale multipart uploads of segments failed; a bucket lifecycle rule for incomplete uploads removes them",
			slog.Any("error", st.sweepErr(n, err)))
	} else if n > 0 {
		st.log.Info("aborted the unfinished multipart uploads of an earlier process", slog.Int("uploads", n))
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
		case err := <-ch: // the first Close has returned: its answer, even if ctx is done
			ch <- err
			return err
		default:
		}
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
		if unsure == 1 {
			what = append(what, "1 segment whose upload was under way may or may not be stored")
		} else {
			what = append(what, fmt.Sprintf("%d segments whose uploads were under way may or may not be stored", unsure))
		}
	}
	return fmt.Errorf("dlqdump: s3: close: %s (%d bytes): %w", strings.Join(what, "; "), b, err)
}
