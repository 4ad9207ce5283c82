package sink

import (
	"context"
	"io"
)

// Writer stores the segments a dlqdump.Queue writes (the seed's Writer): a
// directory (fs.Writer) or an S3 prefix (s3.Writer). It only stores bytes;
// the segment format is written by the Queue, so every sink holds the same
// files. A Writer belongs to one Queue, which calls its optional Recover,
// Flush and Close.
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
	// be recovered. The Queue calls it only in Durable mode.
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
// segments (see Recoverer) can take it over.

// Recoverer is implemented by Writers that can find segments left unfinished
// by a crash. NewQueue calls Recover before accepting items; it seals and
// publishes the intact blocks of every such segment and returns their names.
type Recoverer interface {
	Recover(ctx context.Context) ([]string, error)
}

// Backlogger is implemented by Writers that hold committed segments before
// they reach their destination (e.g. an S3 Writer's spool while S3 is
// unreachable). The Queue counts the backlog in Rate and backpressure.
type Backlogger interface {
	// Backlog returns the bytes committed but not yet stored.
	Backlog() int64
}
