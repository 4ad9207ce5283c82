package sink

import (
	"context"
	"errors"
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
