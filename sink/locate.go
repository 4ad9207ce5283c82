package sink

import "context"

// Locator is implemented by Readers whose location can be missing as a
// whole, such as a directory (fs.Reader), where List cannot tell a missing
// location (a typo) from an empty one. The Restorer checks it before every
// pass and refresh.
type Locator interface {
	// Locate returns nil when the location exists, and an error wrapping
	// ErrNotFound that names it when it does not.
	Locate(ctx context.Context) error
}
