package sink

import (
	"context"
	"errors"
	"iter"
)

// Prober is implemented by Readers that tell whether a segment is there more
// cheaply than Open, which may start reading it (an S3 Reader's Open fetches
// the first bytes in the request that finds the segment; Exists is one
// HEAD).
type Prober interface {
	// Exists reports whether a segment is in area.
	Exists(ctx context.Context, area Area, name string) (bool, error)
}

// Exists reports whether a segment is in area, through r's Prober, or by
// opening it.
func Exists(ctx context.Context, r Reader, area Area, name string) (bool, error) {
	if p, ok := r.(Prober); ok {
		return p.Exists(ctx, area, name)
	}
	f, err := r.Open(ctx, area, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_ = f.Close()
	return true, nil
}

// Discarder is implemented by Readers that remove segments more cheaply than
// Delete when the caller needs no ErrNotFound for a segment that is gone (an
// S3 Reader's Delete asks first whether the segment is there; Discard does
// not, and removes several segments in one request).
type Discarder interface {
	// Discard removes the segments of area named names. A segment that is
	// not there is not an error. It may be retried after a failure, also
	// one that took effect.
	Discard(ctx context.Context, area Area, names ...string) error
}

// Discard removes segments through r's Discarder, or with Delete, ignoring
// ErrNotFound.
func Discard(ctx context.Context, r Reader, area Area, names ...string) error {
	if d, ok := r.(Discarder); ok {
		return d.Discard(ctx, area, names...)
	}
	var errs []error
	for _, name := range names {
		if err := r.Delete(ctx, area, name); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NameSeeker is implemented by Readers that list an area's names from a
// given name on at the cost of what is listed (an S3 Reader: a request per
// page from there), rather than of the whole area.
type NameSeeker interface {
	// NamesAfter returns the names of an area's segments that sort after
	// after, oldest first.
	NamesAfter(ctx context.Context, area Area, after string) iter.Seq2[string, error]
}

// NamesAfter lists an area's names after after, oldest first, through r's
// NameSeeker, or by skipping the names of its listing up to after.
func NamesAfter(ctx context.Context, r Reader, area Area, after string) iter.Seq2[string, error] {
	if s, ok := r.(NameSeeker); ok {
		return s.NamesAfter(ctx, area, after)
	}
	return func(yield func(string, error) bool) {
		for name, err := range Names(ctx, r, area) {
			if err == nil && name <= after {
				continue
			}
			if !yield(name, err) || err != nil {
				return
			}
		}
	}
}

// RecordDropper is implemented by Records that remove a record whatever its
// version more cheaply than a read and a DeleteRecord (an S3 table: one
// DELETE, where DeleteRecord asks first whether the record is there).
type RecordDropper interface {
	// DropRecord removes the record of name whatever its version. No
	// record is not an error. It may be retried after a failure, also one
	// that took effect.
	DropRecord(ctx context.Context, name string) error
}

// DropRecord removes the record of name from t through its RecordDropper,
// or by reading its version and deleting it at that version (a record that
// changed between the two is then left). No record is not an error. It
// suits records whose every version means the same, such as markers.
func DropRecord(ctx context.Context, t Records, name string) error {
	if d, ok := t.(RecordDropper); ok {
		return d.DropRecord(ctx, name)
	}
	_, version, err := t.ReadRecord(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	err = t.DeleteRecord(ctx, name, version)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		return nil
	}
	return err
}

// VersionLister is implemented by Records whose listing tells each record's
// version (an S3 listing gives the ETag): a reader that keeps the records it
// read can tell the changed ones without reading them all.
type VersionLister interface {
	// RecordVersions returns the names that have a record, sorted, each
	// with its version as ReadRecord returns it.
	RecordVersions(ctx context.Context) iter.Seq2[NameVersion, error]
}

// NameVersion is a record's name and version.
type NameVersion struct {
	Name, Version string
}

// Stamper is implemented by Records that tell cheaply whether their names
// changed (a directory: its modification time), where the only other way is
// to list them: a jobs.Runner that has nothing to do reads the stamp of its
// due markers every few milliseconds and lists them only when it changed,
// so that a job created due now starts at once.
type Stamper interface {
	// Stamp returns a token that changes whenever a record is added or
	// removed, to be compared with an earlier one; "" when it cannot be
	// told. It may change for other reasons too.
	Stamp(ctx context.Context) (string, error)
}
