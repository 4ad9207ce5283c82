package dlqdump

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Sentinel errors. Errors returned by this package wrap one of these (or one
// of the segment package's) with details: the config field, the segment and
// offset, the cause.
var (
	// ErrConfig means a Config field has an invalid value; the error names
	// the field.
	ErrConfig = sink.ErrConfig
	// ErrClosed means the Queue or Restorer was closed.
	ErrClosed = sink.ErrClosed
	// ErrEncode means the Encoder could not encode an item.
	ErrEncode = errors.New("dlqdump: cannot encode item")
	// ErrBackpressure means Enqueue waited Config.EnqueueTimeout for the
	// bytes not yet written to drop under Config.MaxPending, and they did
	// not. The item was not accepted.
	ErrBackpressure = errors.New("dlqdump: too many bytes not yet written")
	// ErrNotDurable means a Durable Enqueue accepted the item but it was not
	// on disk within Config.EnqueueTimeout. The item stays in memory and is
	// written when the sink recovers, unless the process dies first.
	ErrNotDurable = errors.New("dlqdump: item accepted but not yet durable")
	// ErrSink means the Writer failed to write or publish a segment; the
	// Queue keeps the data and retries.
	ErrSink = errors.New("dlqdump: sink failure")
	// ErrNotStored means Close, Shutdown or Flush returned before every
	// record accepted was stored where readers find it. Shutdown's error is
	// a *ShutdownError counting those records by what became of them.
	ErrNotStored = errors.New("dlqdump: not everything accepted is stored")
	// ErrNotWritten means a record is not in the dump and will not be: the
	// Queue stopped before writing it, or the sink dropped what held it
	// (an open segment in memory). Dumping it again stores it once.
	ErrNotWritten = errors.New("dlqdump: record not written")
	// ErrNotSynced means a record was written into the open segment but
	// neither synced nor published when the Queue stopped. The segment is
	// left for recovery: the next NewQueue on the same sink publishes the
	// record, unless the machine lost power first. Dumping it again may
	// store it twice.
	ErrNotSynced = errors.New("dlqdump: record written but not synced")
	// ErrInDoubt means a record was inside a sink call (a write, a
	// truncate, a commit) that had not returned when Shutdown gave up: it
	// may or may not be stored.
	ErrInDoubt = errors.New("dlqdump: record in doubt")
	// ErrUnavailable is for a Restorer's destination (Config.Queue) to
	// wrap in what its Enqueue returns when it cannot take anything now
	// (it is down, overloaded or unreachable), as opposed to refusing this
	// one record. The Restorer retries such an answer like a refusal, up
	// to MaxAttempts; then, instead of setting the record aside for
	// quarantine, it stops the pass at that record: the progress saved
	// names it as the next to deliver, the segment stays ready, and Run
	// returns an error wrapping ErrUnavailable. The next pass (after
	// CheckInterval, once Started) begins there. A record whose every
	// delivery makes the destination answer ErrUnavailable therefore
	// holds its segment up; return another error for a record the
	// destination refuses for what it is.
	ErrUnavailable = errors.New("dlqdump: destination unavailable")
	// ErrNotFound means a segment does not exist (any more) in that area.
	ErrNotFound = sink.ErrNotFound
	// ErrClaimed means another restorer holds a live claim on the segment.
	ErrClaimed = claims.ErrClaimed
	// ErrLeaseLost means the claim expired and was taken over: the holder
	// must stop restoring that segment at once.
	ErrLeaseLost = claims.ErrLeaseLost
	// ErrTooLarge means an encoded item exceeds Config.MaxRecordSize.
	ErrTooLarge = segment.ErrTooLarge
	// ErrCorrupt means a segment is damaged; see segment.CorruptError.
	ErrCorrupt = segment.ErrCorrupt
)

// ShutdownError is the error of a Queue.Shutdown (or Close) that returned
// before every record accepted was stored where readers find it. Each such
// record is counted once, by what became of it. It wraps ErrNotStored, the
// sentinel of each non-zero count (ErrNotWritten, ErrNotSynced, ErrInDoubt)
// and Err.
type ShutdownError struct {
	// NotWritten counts the records that are not in the dump and will not
	// be: never written, or held only in memory the sink dropped. Dumping
	// them again stores them once.
	NotWritten int
	// NotSynced counts the records written into the open segment, which is
	// left for recovery: the next NewQueue on the same sink publishes them,
	// unless the machine lost power first.
	NotSynced int
	// Held counts the records in HeldSegments committed segments that the
	// Writer keeps on stable storage and stores after the next start (an
	// s3.Writer's SpoolDir, uploaded by its Recover).
	Held, HeldSegments int
	// InDoubt counts the records inside a sink call that had not returned:
	// they may or may not be stored.
	InDoubt int
	// Err is why: the context's error, the Writer's error, the last sink
	// error.
	Err error
}

// Error describes the counts and the cause.
func (e *ShutdownError) Error() string {
	var parts []string
	if e.NotWritten > 0 {
		parts = append(parts, fmt.Sprintf("%d records not written (not in the dump)", e.NotWritten))
	}
	if e.NotSynced > 0 {
		parts = append(parts, fmt.Sprintf("%d records written but not synced (published by the next start, unless the machine lost power)", e.NotSynced))
	}
	if e.Held > 0 || e.HeldSegments > 0 {
		parts = append(parts, fmt.Sprintf("%d records in %d committed segments held by the Writer (stored after the next start)", e.Held, e.HeldSegments))
	}
	if e.InDoubt > 0 {
		parts = append(parts, fmt.Sprintf("%d records in doubt (inside a sink call that had not returned)", e.InDoubt))
	}
	if len(parts) == 0 {
		parts = append(parts, "0 records")
	}
	msg := "dlqdump: shutdown: not stored: " + strings.Join(parts, ", ")
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrNotStored, the sentinels of the non-zero counts and Err.
func (e *ShutdownError) Unwrap() []error {
	errs := []error{ErrNotStored}
	if e.NotWritten > 0 {
		errs = append(errs, ErrNotWritten)
	}
	if e.NotSynced > 0 {
		errs = append(errs, ErrNotSynced)
	}
	if e.InDoubt > 0 {
		errs = append(errs, ErrInDoubt)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}
