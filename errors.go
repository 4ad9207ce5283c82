package dlqdump

import (
	"errors"

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
	// ErrNotFound means a segment does not exist (any more) in that area.
	ErrNotFound = sink.ErrNotFound
	// ErrClaimed means another restorer holds a live claim on the segment.
	ErrClaimed = claims.ErrClaimed
	// ErrLeaseLost means the claim expired and was taken over: the holder
	// must stop restoring that segment at once.
	ErrLeaseLost = claims.ErrLeaseLost
	// ErrTooLarge means an encoded item exceeds segment.MaxRecordSize.
	ErrTooLarge = segment.ErrTooLarge
	// ErrCorrupt means a segment is damaged; see segment.CorruptError.
	ErrCorrupt = segment.ErrCorrupt
)
