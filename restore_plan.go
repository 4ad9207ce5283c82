package dlqdump

import (
	"context"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// A selective pass (RunOptions.Since, Until, Where, Select) plans each
// segment before it claims it: a segment whose header, footer and summary
// rule out every record it could select is neither claimed nor read, and a
// quarantined one is not released. The records it does read are matched
// one by one (selects).

// planNames returns the names of a selective pass's segments that may hold
// a record it selects, in order; the others are counted in
// rep.SkippedSegments. A segment that cannot be opened or read is kept: its
// run says why.
func (r *Restorer) planNames(ctx context.Context, opts *RunOptions, names []string, rep *Report) []string {
	if opts.sel.IsAll() {
		return names
	}
	area := sink.AreaReady
	if opts.Area == AreaQuarantine {
		area = sink.AreaQuarantine
	}
	out := make([]string, 0, len(names))
	for i, name := range names {
		if ctx.Err() != nil {
			return append(out, names[i:]...)
		}
		if opts.wants(name) && r.rulesOut(ctx, area, name, opts.sel) {
			rep.SkippedSegments++
			continue
		}
		out = append(out, name)
	}
	return out
}

// selects reports whether the pass's selection selects rec, a record of the
// segment being run.
func (g *segRun) selects(rec *segment.Record) bool {
	area := sink.AreaReady
	if g.opts.Area == AreaQuarantine {
		area = sink.AreaQuarantine // released from there
	}
	return g.opts.sel.Match(&selection.Segment{Area: area, Name: g.name, Header: &g.hdr}, rec)
}
