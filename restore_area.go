package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
func (r *Restorer) release(ctx context.Context, name string, opts *RunOptions) error {
	if opts.DryRun {
		return nil
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
