package segment

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them; damage
// found while reading is reported as a *CorruptError that also names the
// segment and the offset.
var (
	// ErrCorrupt means bytes of a segment do not match their checksum or
	// do not parse.
	ErrCorrupt = errors.New("dlqdump: segment corrupt")
	// ErrFormat means the bytes are not a segment this package can read:
	// wrong magic, unknown format version or codec.
	ErrFormat = errors.New("dlqdump: unsupported segment format")
	// ErrUnsealed means the segment has no valid footer: its writer did not
	// finish it. Its intact blocks are still readable.
	ErrUnsealed = errors.New("dlqdump: segment not sealed")
	// ErrTooLarge means a record or block exceeds the size caps.
	ErrTooLarge = errors.New("dlqdump: record too large")
	// ErrClosed means the writer was already sealed or aborted.
	ErrClosed = errors.New("dlqdump: segment writer closed")
)

// CorruptError reports damage at a place in a segment. It wraps ErrCorrupt,
// ErrFormat or ErrTooLarge, so errors.Is works on it.
type CorruptError struct {
	// Segment is the segment's name as given to the reader.
	Segment string
	// Offset is where the damaged part starts.
	Offset int64
	// Block is the index of the damaged block, or -1 for the header or footer.
	Block int
	// Err says what is wrong.
	Err error
}

// Error returns "dlqdump: segment NAME offset N block B: reason".
func (e *CorruptError) Error() string {
	name := e.Segment
	if name == "" {
		name = "<unnamed>"
	}
	where := fmt.Sprintf("offset %d", e.Offset)
	if e.Block >= 0 {
		where += fmt.Sprintf(" block %d", e.Block)
	}
	return fmt.Sprintf("segment %s %s: %v", name, where, e.Err)
}

// Unwrap returns the underlying error.
func (e *CorruptError) Unwrap() error { return e.Err }
