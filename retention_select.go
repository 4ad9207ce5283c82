package dlqdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// errUnselected: a segment due to expire holds a record PruneOptions.Select
// does not select, so it is left. errNoneSelected: it holds none the
// selection selects (an area pruned by the selection alone does not count
// it).
var (
	errUnselected   = errors.New("dlqdump: the segment holds records the selection does not select")
	errNoneSelected = fmt.Errorf("%w (none it selects)", errUnselected)
)

// selectedWhole returns nil when sel selects every record of the segment f
// that its progress does not count as handled already (delivered, or
// copied to a side segment), errNoneSelected when it selects none of them
// and errUnselected when it selects some. What the segment's area, name,
// footer and summary say decides first; otherwise its records are read, up
// to the first one not selected after one selected. A segment that cannot be
// read whole (damaged, no key) is not known to be selected whole: it is
// left.
func (r *Restorer) selectedWhole(ctx context.Context, f sink.File, si sink.Info, progress json.RawMessage, sel *selection.Selection) error {
	sr, err := segment.NewReaderContext(ctx, f, f.Size(), r.readerOptions(si.Name))
	if err != nil {
		var ce *segment.CorruptError
		if errors.As(err, &ce) || errors.Is(err, segment.ErrNoKey) {
			return fmt.Errorf("%w (and cannot be read: %v)", errUnselected, err)
		}
		return fmt.Errorf("dlqdump: read segment %s: %w", si.Name, err)
	}
	hdr := sr.Header()
	seg := &selection.Segment{Area: si.Area, Name: si.Name, Header: &hdr, Footer: sr.Footer()}
	if sel.SelectsAll(seg) {
		return nil
	}
	seg.Summary, _ = sr.Summary() // none, damaged or sealed: it may match
	if sel.SkipSegment(seg) {
		return errNoneSelected
	}
	handled := func(uint64) bool { return false }
	if p, err := claims.ParseProgress(progress); err == nil && progress != nil {
		handled = func(seq uint64) bool {
			if seq >= p.Seq && !p.Done {
				return false
			}
			return !p.Listed(seq)
		}
	}
	selected, unselected := false, false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := sr.Next()
		switch {
		case err == io.EOF && unselected:
			return errNoneSelected
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("%w (and cannot be read whole: %v)", errUnselected, err)
		case handled(rec.Seq):
			continue
		}
		if sel.Match(seg, &rec) {
			selected = true
		} else {
			unselected = true
		}
		if selected && unselected {
			return errUnselected
		}
	}
}
