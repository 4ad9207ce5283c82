package dlqdump

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Writer is where a Queue publishes segments (seed: Writer): a directory
// (fs.Writer) or an S3 prefix (s3.Writer). See package sink.
type Writer = sink.Writer

// SegmentWriter receives the bytes of one segment; see package sink.
type SegmentWriter = sink.SegmentWriter

// Recoverer is implemented by Writers that recover unfinished segments; see
// package sink.
type Recoverer = sink.Recoverer

// Backlogger is implemented by Writers that store committed segments later;
// see package sink.
type Backlogger = sink.Backlogger

// Area is a part of a store: segments ready to restore, quarantined ones
// (moved aside with a reason, restorable later) and archived ones (restored,
// kept when Config.Archive is set).
type Area uint8

// Areas.
const (
	AreaReady Area = iota
	AreaQuarantine
	AreaArchive
)

// String returns "ready", "quarantine" or "archive".
func (a Area) String() string {
	switch a {
	case AreaReady:
		return "ready"
	case AreaQuarantine:
		return "quarantine"
	case AreaArchive:
		return "archive"
	}
	return fmt.Sprintf("Area(%d)", uint8(a))
}

// ParseArea returns the area named s.
func ParseArea(s string) (Area, error) {
	for a := AreaReady; a <= AreaArchive; a++ {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown area %q (want ready, quarantine or archive)", ErrConfig, s)
}

// SegmentInfo describes a stored segment.
type SegmentInfo struct {
	// Name is the segment's name, e.g. "20261122T101500.123456789Z-0123456789abcdef.dlq".
	Name string
	// Area is where the segment is.
	Area Area
	// Size is the segment's size in bytes.
	Size int64
	// Modified is when the segment was last written or moved.
	Modified time.Time
	// Claim describes the restore claim on a ready segment; nil if none.
	Claim *ClaimInfo
	// Reason says why a quarantined segment was moved aside, if known.
	Reason string
}

// ClaimInfo describes a restore claim.
type ClaimInfo struct {
	// Owner identifies the restorer holding the claim.
	Owner string
	// Expires is when the lease runs out unless renewed; a zero or past
	// time means anyone may take the claim over.
	Expires time.Time
	// Checkpoint is how far restoring the segment got.
	Checkpoint Checkpoint
}

// Checkpoint records how far a segment was restored, so that a restorer
// taking it over resumes there.
type Checkpoint struct {
	// Position is the next record to deliver.
	Position segment.Position
	// Delivered and Quarantined count the records handled so far.
	Delivered, Quarantined uint64
}

// Reader is where a Restorer finds segments (seed: Reader): a directory
// (fs.Reader) or an S3 prefix (s3.Reader). Like Writer, it only stores bytes
// and claims; the Restorer reads the segment format.
type Reader interface {
	// List returns the segments of an area sorted by name, that is oldest
	// first. Ready segments carry their claim, if any.
	List(ctx context.Context, area Area) iter.Seq2[SegmentInfo, error]
	// Open opens a segment for reading without claiming it. A missing
	// segment is an error wrapping ErrNotFound.
	Open(ctx context.Context, area Area, name string) (SegmentFile, error)
	// Claim takes the lease on a ready segment for owner, for lease. It
	// fails with ErrClaimed while another owner's lease is live; an expired
	// lease is taken over, checkpoint included. A missing segment is an
	// error wrapping ErrNotFound.
	Claim(ctx context.Context, name, owner string, lease time.Duration) (Claim, error)
	// Create starts a new segment in an area (the Restorer writes
	// quarantined records and the rest of partly restored segments this
	// way). It is published atomically on Commit.
	Create(ctx context.Context, area Area, name string) (SegmentWriter, error)
	// Move moves an unclaimed segment to another area. reason is kept with
	// a segment moved to quarantine and dropped when it leaves it.
	Move(ctx context.Context, name string, from, to Area, reason string) error
	// Delete removes a segment.
	Delete(ctx context.Context, area Area, name string) error
}

// SegmentFile is an open segment.
type SegmentFile interface {
	io.ReaderAt
	// Size returns the segment's size in bytes.
	Size() int64
	Close() error
}

// Claim is a live lease on a ready segment. Only its holder changes the
// segment until it is released, completed or quarantined, or the lease
// expires without renewal and another restorer takes it over; every method of
// a claim taken over fails with ErrLeaseLost.
type Claim interface {
	// Name returns the segment's name.
	Name() string
	// Checkpoint returns the checkpoint found when the claim was taken.
	Checkpoint() Checkpoint
	// Renew extends the lease by its duration from now and records cp.
	Renew(ctx context.Context, cp Checkpoint) error
	// Release ends the claim, keeping the last checkpoint: the segment is
	// ready again and the next claim resumes there.
	Release(ctx context.Context) error
	// Complete removes the restored segment, or moves it to the archive
	// area when archive is true, and ends the claim.
	Complete(ctx context.Context, archive bool) error
	// Quarantine moves the segment to the quarantine area with the reason
	// and ends the claim.
	Quarantine(ctx context.Context, reason string) error
}
