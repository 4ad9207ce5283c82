package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// quarantineNames lists the quarantined segments a pass of opts (Area:
// AreaQuarantine) releases and restores, oldest first.
func (r *Restorer) quarantineNames(ctx context.Context, opts *RunOptions) ([]string, error) {
	var names []string
	for name, err := range sink.Names(ctx, r.c.Reader, AreaQuarantine) {
		if err != nil {
			return nil, fmt.Errorf("%w: list the quarantine: %w", ErrSink, err)
		}
		if opts.wants(name) {
			names = append(names, name)
		}
	}
	return names, nil
}

// release moves a quarantined segment back to the ready area, keeping its
// record (what was delivered before it was quarantined), so that the pass
// restores it. A dry run reads it in quarantine instead.
//
// Its record is settled first (releasable): a segment moved to quarantine
// whose record does not say so yet — a holder between its move and the
// record's end, or one that stopped there — would be moved back to
// quarantine by whoever completed that finish once it was released.
func (r *Restorer) release(ctx context.Context, name string, opts *RunOptions) error {
	if opts.DryRun {
		return nil
	}
	if err := r.releasable(ctx, name); err != nil {
		return err
	}
	err := r.c.Reader.Move(ctx, name, AreaQuarantine, AreaReady, "")
	if errors.Is(err, ErrNotFound) {
		return nil // released (or removed) meanwhile by someone else
	}
	if err != nil {
		return fmt.Errorf("%w: release quarantined segment %s: %w", ErrSink, name, err)
	}
	r.log.Info("released a quarantined segment to restore it", slog.String("segment", name))
	return nil
}

// releasable settles the record of a quarantined segment before its
// release. A claim on it seen live is ErrClaimed: the segment stays in
// quarantine, for a later pass, while its holder ends its move there. A
// finish to quarantine its holder decided and did not end (it stopped, its
// lease ran out) is completed by claiming it: the segment is in quarantine
// already, so that only ends the record as a move to quarantine does,
// keeping the progress, and counts what the finish accounts for. Any other
// finish decided on a segment found in quarantine is left to a person
// (ErrClaimed): completing it would drop the record's progress.
func (r *Restorer) releasable(ctx context.Context, name string) error {
	_, _, err := r.claimer.Check(ctx, name)
	var fin *claims.Finished
	switch {
	case err == nil || errors.Is(err, ErrNotFound):
		// No record, or one that ended in quarantine.
		return nil
	case !errors.As(err, &fin):
		return err
	case fin.To.Delete || fin.To.Area != sink.AreaQuarantine:
		r.log.Warn("a quarantined segment's record says that its holder decided to delete or archive it: left in quarantine, not released",
			slog.String("segment", name), slog.String("decided_by", fin.Owner), slog.String("finish", fin.To.String()))
		return fmt.Errorf("%w: quarantined segment %s: its record says that %q decided to %s it: left in quarantine", ErrClaimed, name, fin.Owner, fin.To)
	}
	cl, err := r.claimer.Claim(ctx, name)
	if errors.As(err, &fin) {
		r.completed(fin, nil)
		return nil
	}
	if err == nil {
		// Changed since the check: released as found.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopDeadline)
		defer cancel()
		return cl.Release(rctx)
	}
	return err
}
