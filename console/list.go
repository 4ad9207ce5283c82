package console

import (
	"context"
	"iter"

	"github.com/dlqdump/dlqdump/sink"
)

// list lists an area's segments, oldest first, at the cost of a listing:
// where the Reader lists names more cheaply than Infos (an S3 Reader reads
// each quarantined segment's reason with a request of its own), the Infos
// have only names and a Size of -1.
func (h *Handler) list(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	if _, ok := h.rd.(sink.NameLister); !ok || area != sink.AreaQuarantine {
		return h.rd.List(ctx, area)
	}
	return func(yield func(sink.Info, error) bool) {
		for n, err := range sink.Names(ctx, h.rd, area) {
			if !yield(sink.Info{Name: n, Area: area, Size: -1}, err) || err != nil {
				return
			}
		}
	}
}
