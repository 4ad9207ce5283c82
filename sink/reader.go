package sink

import (
	"context"
	"fmt"
	"io"
	"iter"
	"time"
)

// Area is a part of a store: segments ready to restore, quarantined ones
// (moved aside with a reason, restorable later) and archived ones (restored,
// kept when the Restorer archives).
type Area uint8

// Areas.
const (
	AreaReady Area = iota
	AreaQuarantine
	AreaArchive
	// AreaStaging holds segments written on behalf of a claim before the
	// claim protocol decides to publish them (dlqdump's fenced publish):
	// no restorer lists it, and a staged segment becomes visible only
	// through Unstage. It is not one of the areas users name (Valid is
	// false for it); every sink supports it in List, Open, Create, Delete
	// and Unstage.
	AreaStaging
)

// String returns "ready", "quarantine", "archive" or "staging".
func (a Area) String() string {
	switch a {
	case AreaReady:
		return "ready"
	case AreaQuarantine:
		return "quarantine"
	case AreaArchive:
		return "archive"
	case AreaStaging:
		return "staging"
	}
	return fmt.Sprintf("Area(%d)", uint8(a))
}

// Valid reports whether a is one of the three areas users name: ready,
// quarantine or archive.
func (a Area) Valid() bool { return a <= AreaArchive }

// Stored reports whether a sink stores segments in a: one of the three
// areas or AreaStaging.
func (a Area) Stored() bool { return a <= AreaStaging }

// ParseArea returns the area named s.
func ParseArea(s string) (Area, error) {
	for a := AreaReady; a <= AreaArchive; a++ {
		if a.String() == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown area %q (want ready, quarantine or archive)", ErrConfig, s)
}

// Info describes a stored segment.
type Info struct {
	// Name is the segment's name, e.g. "20261122T101500.123456789Z-0123456789abcdef.dlq".
	Name string
	// Area is where the segment is.
	Area Area
	// Size is the segment's size in bytes.
	Size int64
	// Modified is when the segment was last written or moved.
	Modified time.Time
	// Reason says why a quarantined segment was moved aside, if known.
	Reason string
}

// File is an open segment.
type File interface {
	io.ReaderAt
	// Size returns the segment's size in bytes.
	Size() int64
	Close() error
}

// Reader is where a dlqdump.Restorer finds segments (the seed's Reader): a
// directory (fs.Reader) or an S3 prefix (s3.Reader). It stores segments in
// areas and one small record per segment name (see Records); claims, leases
// and checkpoints are built on these by dlqdump, once for every sink.
//
// Every method is safe to retry after a failure, including one that took
// effect and reported failure: Commit and Move never replace a segment, and
// a record changes only by compare-and-swap.
type Reader interface {
	// List returns the segments of an area sorted by name, that is oldest
	// first. A missing area is empty.
	List(ctx context.Context, area Area) iter.Seq2[Info, error]
	// Open opens a segment for reading. A missing segment is an error
	// wrapping ErrNotFound.
	Open(ctx context.Context, area Area, name string) (File, error)
	// Create starts a new segment in an area (the Restorer writes the
	// records it sets aside this way, the CLI its copies). Commit publishes
	// it atomically unless a segment of that name is in the area already:
	// then Commit fails with an error wrapping ErrExist. A segment created
	// this way and never committed is discarded after a crash, never
	// published in part.
	Create(ctx context.Context, area Area, name string) (SegmentWriter, error)
	// Move moves a segment from one area to another, unless a segment of
	// that name is there already (an error wrapping ErrExist, nothing
	// changed; if that segment holds the same bytes, as after a Move that
	// took effect and reported failure, the source is removed and Move
	// succeeds). reason is kept with a segment moved to quarantine and
	// dropped when it leaves it. A missing segment is an error wrapping
	// ErrNotFound. Move knows nothing of claims: callers claim a ready
	// segment before moving it.
	Move(ctx context.Context, name string, from, to Area, reason string) error
	// Delete removes a segment. A missing segment is an error wrapping
	// ErrNotFound.
	Delete(ctx context.Context, area Area, name string) error
	// Unstage moves the segment staged in AreaStaging as staged into area
	// to, named name, with Move's guarantees: it never replaces a segment
	// (a segment of that name there already is an error wrapping
	// ErrExist, unless it holds the same bytes: then the staged one is
	// removed and Unstage succeeds), reason is kept with a segment moved
	// to quarantine, and a missing staged segment is an error wrapping
	// ErrNotFound. The claim protocol stages a segment under a name only
	// its claim uses and unstages it only once the claim's record says
	// so, so that a holder that stalls past its lease never makes
	// anything visible.
	Unstage(ctx context.Context, staged, name string, to Area, reason string) error

	Records
}

// Records is a sink's store of small records, at most one per segment name
// and independent of the segment's area: dlqdump keeps a segment's claim and
// restore progress there (a few KiB of JSON, at most MaxRecordSize). A record
// changes only by compare-and-swap on its version, an opaque string that
// changes whenever the record's bytes do.
type Records interface {
	// ReadRecord returns the record kept for a segment name and its
	// version. No record is an error wrapping ErrNotFound.
	ReadRecord(ctx context.Context, name string) (data []byte, version string, err error)
	// WriteRecord stores data as the record of name if the current record's
	// version is ifVersion, or, with ifVersion "", if there is no record.
	// It returns the new version. A record that changed (or appeared, or
	// vanished) is an error wrapping ErrConflict, and nothing is written.
	WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (version string, err error)
	// DeleteRecord removes the record of name if its version is ifVersion
	// (ErrConflict otherwise). A sink whose store cannot make a delete
	// conditional removes the record whatever its version, and says so in
	// its documentation. No record is an error wrapping ErrNotFound.
	DeleteRecord(ctx context.Context, name, ifVersion string) error
	// RecordNames returns the names that have a record, sorted.
	RecordNames(ctx context.Context) iter.Seq2[string, error]
}

// MaxRecordSize bounds the size of a record: sinks may refuse larger ones and
// read no more than this of one.
const MaxRecordSize = 64 << 10

// NameLister is implemented by Readers that list an area's names more
// cheaply than List lists its Infos (an S3 Reader reads each quarantined
// segment's reason with a request of its own).
type NameLister interface {
	// Names returns the names of an area's segments, oldest first.
	Names(ctx context.Context, area Area) iter.Seq2[string, error]
}

// Names lists an area's names through r's NameLister, or its List.
func Names(ctx context.Context, r Reader, area Area) iter.Seq2[string, error] {
	if nl, ok := r.(NameLister); ok {
		return nl.Names(ctx, area)
	}
	return func(yield func(string, error) bool) {
		for si, err := range r.List(ctx, area) {
			if !yield(si.Name, err) || err != nil {
				return
			}
		}
	}
}
