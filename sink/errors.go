package sink

import "errors"

// Sentinel errors shared by every sink and by package dlqdump, which re-exports
// them. Sinks wrap them with the operation, the area and the name.
var (
	// ErrConfig means a field has an invalid value; the error names it.
	ErrConfig = errors.New("dlqdump: invalid config")
	// ErrClosed means the object was closed (or the claim ended).
	ErrClosed = errors.New("dlqdump: closed")
	// ErrNotFound means a segment or record does not exist (any more).
	ErrNotFound = errors.New("dlqdump: not found")
	// ErrExist means a segment of that name is already where a segment was
	// to be published or moved: nothing was replaced.
	ErrExist = errors.New("dlqdump: a segment of that name already exists")
)

// ErrConflict means a record's version was not the one a compare-and-swap
// expected: another writer changed, created or removed it.
var ErrConflict = errors.New("dlqdump: record changed meanwhile")
