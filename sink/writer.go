package sink

import (
	"context"
	"io"
)

// Writer stores the segments a dlqdump.Queue writes (the seed's Writer): a
// directory (fs.Writer) or an S3 prefix (s3.Writer). It only stores bytes;
// the segment format is written by the Queue, so every sink holds the same
// files.
//
// A Writer belongs to one Queue, which owns its lifecycle and calls its
// optional interfaces: CheckDurable (DurabilityChecker) when the Queue is
// Durable, Recover (Recoverer) before the first segment, Flush (Flusher) on
// Queue.Flush, Close (Closer) on Queue.Close and Shutdown, and Backlog or
// WatchBacklog (Backlogger, BacklogWatcher) at any time. The Queue makes the
// calls of Writer and SegmentWriter from one goroutine at a time; Flush,
// Close, Backlog and WatchBacklog may come from other goroutines at the same
// time as those.
//
// A Writer that stores a committed segment later (in the background) must
// implement Closer, and should implement Flusher and BacklogWatcher, so that
// the Queue's Close, Flush and Stats mean "stored where readers find it".
type Writer interface {
	// Create starts a new segment with the given name (made by
	// segment.FileName). Its bytes become visible to readers only when
	// committed, all at once.
	Create(ctx context.Context, name string) (SegmentWriter, error)
}

// SegmentWriter receives the bytes of one segment, in order.
type SegmentWriter interface {
	io.Writer
	// Sync makes the bytes written so far durable: after a crash they can
	// be recovered. The Queue calls it only in Durable mode. After a failed
	// Sync the Queue truncates the segment to its size at the last
	// successful Sync and writes the blocks after it again.
	Sync() error
	// Truncate discards the bytes after the first size bytes, so that
	// a failed write can be retried.
	Truncate(size int64) error
	// Commit publishes the segment atomically under its name, never
	// replacing another segment; readers never see part of it. A failed
	// Commit may be retried, also after a Commit that took effect but
	// reported failure: that retry succeeds.
	Commit(ctx context.Context) error
	// Abort discards the segment.
	Abort() error
}

// A SegmentWriter that is also an io.Closer is closed without being committed
// when Queue.Shutdown gives up on it, so that a sink which recovers unfinished
// segments (see Recoverer) can take it over; the Queue then reports its
// records as written but not synced (dlqdump.ErrNotSynced). One that is not an
// io.Closer is aborted, and its records reported as not written.

// Recoverer is implemented by Writers that can find segments left unfinished
// by a crash. NewQueue calls Recover before accepting items; it seals and
// publishes the intact blocks of every such segment and returns their names.
type Recoverer interface {
	Recover(ctx context.Context) ([]string, error)
}

// Flusher is implemented by Writers that store committed segments later
// (e.g. an S3 Writer uploading from a spool). Queue.Flush calls it after
// committing the flushed segment.
type Flusher interface {
	// Flush returns when every segment committed before the call is stored
	// where readers find it, or when ctx is done; then its error says how
	// many segments are not stored yet.
	Flush(ctx context.Context) error
}

// Closer is implemented by Writers that hold resources or committed segments
// (a spool, an uploader goroutine). Queue.Close and Shutdown call Close once,
// after the Queue's last Commit, with the Shutdown's context.
type Closer interface {
	// Close stores every committed segment, or gives up when ctx is done,
	// and then releases the Writer: later Creates fail with an error
	// wrapping ErrClosed. Its error says how many segments are not stored
	// and whether they are lost or kept for the next start (see
	// Backlog.Persistent). When Shutdown gives up on a sink call that has
	// not returned, Close may be called while that call is in progress,
	// and should make it return. Later calls return the first call's
	// result, so a user closing the Writer again after the Queue does no
	// harm.
	Close(ctx context.Context) error
}

// Backlogger is implemented by Writers that hold committed segments before
// they reach their destination (e.g. an S3 Writer's spool while S3 is
// unreachable). The Queue counts the backlog in Rate and backpressure; an
// Enqueue waiting for room asks for it again every 50ms at most (a
// BacklogWatcher wakes it at once instead).
type Backlogger interface {
	// Backlog returns the bytes committed but not yet stored.
	Backlog() int64
}

// Backlog is what a Writer holds at one instant: committed segments not yet
// stored.
type Backlog struct {
	// Segments and Bytes are the committed segments not yet stored, and
	// their size.
	Segments int
	Bytes    int64
	// Uncertain is how many of the held segments, the oldest, may be
	// stored already: an upload of them was attempted and not confirmed
	// (its answer was lost, or the Writer stopped while it was under way).
	Uncertain int
	// Persistent says whether the held segments survive the process (an
	// S3 Writer's SpoolDir): a Writer started on the same place stores
	// them. When false they are lost if the process ends first.
	Persistent bool
	// Stopped says that the Writer stores nothing more (it is closed):
	// what it holds stays held. Until then it may still store what it
	// holds, even after a Close that returned an error.
	Stopped bool
	// LastError is the last failure to store a segment, nil after a
	// success.
	LastError error
	// Changed is closed at the next change of Segments or Bytes (and when
	// the Writer closes). Never nil.
	Changed <-chan struct{}
}

// BacklogWatcher is a Backlogger that also says how many segments it holds
// and when that changes. It stores segments in the order they were committed,
// so the held ones are always the last committed. The Queue uses it to wake
// Enqueue callers waiting for room as soon as the backlog shrinks, and to
// tell committed segments from stored ones (Queue.Stats, Shutdown's error).
type BacklogWatcher interface {
	Backlogger
	// WatchBacklog returns the backlog now.
	WatchBacklog() Backlog
}

// DurabilityChecker is implemented by Writers whose SegmentWriters cannot
// always make their bytes durable (an S3 Writer without a spool directory).
// NewQueue calls CheckDurable when Config.Durable is set and refuses the
// config if it fails.
type DurabilityChecker interface {
	// CheckDurable returns nil if Sync makes written bytes durable, and
	// otherwise an error wrapping ErrConfig that names the field to set.
	CheckDurable() error
}
