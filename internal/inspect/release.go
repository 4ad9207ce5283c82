package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqdump/dlqdump/sink"
)

// Release moves a quarantined segment to the ready area, never replacing a
// ready segment; its record (claim and restore progress) stays as it is, so
// a restore resumes where the segment was left. path names a segment of an
// area in errors, which say what was in the way or that the segment was
// gone.
func Release(ctx context.Context, rd sink.Reader, name string, path func(sink.Area, string) string) error {
	err := rd.Move(ctx, name, sink.AreaQuarantine, sink.AreaReady, "")
	switch {
	case errors.Is(err, sink.ErrExist):
		err = fmt.Errorf("release %s: %s is in the way (a segment of that name is ready already; not replaced): %w",
			path(sink.AreaQuarantine, name), path(sink.AreaReady, name), err)
	case errors.Is(err, sink.ErrNotFound):
		err = fmt.Errorf("release %s: gone meanwhile: %w", path(sink.AreaQuarantine, name), err)
	case err != nil:
		err = fmt.Errorf("release %s: %w", path(sink.AreaQuarantine, name), err)
	}
	return err
}
