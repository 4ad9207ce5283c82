package fs

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/dlqdump/dlqdump/sink"
)

var _ sink.Locator = (*Reader)(nil)

// Locate returns nil when Directory exists, and an error wrapping
// sink.ErrNotFound that names it when it does not (a Writer creates it on
// its first segment, a Queue when it starts). It implements sink.Locator.
func (r *Reader) Locate(ctx context.Context) error {
	if r.Directory == "" {
		return fmt.Errorf("%w: fs.Reader.Directory: required", sink.ErrConfig)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := os.Stat(r.Directory)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("dlqdump: fs: directory %s does not exist (a Queue's fs.Writer creates it): %w", r.Directory, sink.ErrNotFound)
	case err != nil:
		return fmt.Errorf("dlqdump: fs: %w", err)
	case !st.IsDir():
		return fmt.Errorf("dlqdump: fs: %s is not a directory", r.Directory)
	}
	return nil
}
