package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// Release moves a quarantined segment to the ready area, never replacing a
// ready segment; its record (claim and restore progress) stays as it is, so
// a restore resumes where the segment was left. path names a segment of an
// area in errors, which say what was in the way or that the segment was
// gone.
//
// With a Claimer, the segment's record is checked first, as a quarantine
// restore pass does (Restorer.release): a segment whose claim a restorer
// holds is not released (a restorer finishing a decided move to quarantine
// would take it back there once released), a decided move to quarantine
// left unfinished is finished first (the record says quarantined, with its
// progress), and a segment whose record says its holder decided to delete
// or archive it is not released.
func Release(ctx context.Context, rd sink.Reader, c *claims.Claimer, name string, path func(sink.Area, string) string) error {
	if c != nil {
		if err := releasable(ctx, c, name); err != nil {
			return fmt.Errorf("release %s: %w", path(sink.AreaQuarantine, name), err)
		}
	}
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

// releasable checks the record of the quarantined segment name before it
// is released, finishing a decided move to quarantine.
func releasable(ctx context.Context, c *claims.Claimer, name string) error {
	_, _, err := c.Check(ctx, name)
	var fin *claims.Finished
	switch {
	case err == nil || errors.Is(err, sink.ErrNotFound):
		return nil // no record, or one that ended in quarantine
	case errors.Is(err, claims.ErrClaimed):
		return fmt.Errorf("a restorer holds its claim (it is working on the segment, or stopped: its claim expires after its lease); try again later, or restore the quarantine with a job (dlqdump job create LOCATION --area quarantine), which waits for it: %w", err)
	case !errors.As(err, &fin):
		return err
	case fin.To.Delete || fin.To.Area != sink.AreaQuarantine:
		return fmt.Errorf("its record says that %q decided to %s it: left in quarantine: %w", fin.Owner, fin.To, claims.ErrClaimed)
	}
	cl, err := c.Claim(ctx, name)
	switch {
	case errors.As(err, &fin):
		return nil // the move finished: the record says quarantined
	case err != nil:
		return err
	}
	// Changed since the check: released as found.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return cl.Release(rctx)
}
