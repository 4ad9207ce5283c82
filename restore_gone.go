package dlqdump

import (
	"context"
	"log/slog"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// gone ends the claim on a segment found missing from the ready area, cause
// being the error that said so. Under a claim made anew, or taken over a
// record whose holder was finishing the segment, a holder finished it since
// the listing: the record is dropped, and cause returned (the pass goes on).
// Under a claim taken over any other record (a holder's progress, live once
// or released), someone moved or removed the segment without its claim (a
// holder that stalled past its lease and went on, a person): the pass says
// where it went and counts it. In quarantine, the claim ends there (its
// record keeps the progress, so releasing the segment resumes where it
// was, and delivers nothing twice); in the archive, it ends as archived; in
// no area, it is logged with what its progress says and counted
// (Report.Gone, MetricsWriter.Fail("gone")).
func (g *segRun) gone(cause error) error {
	r, cl := g.r, g.keep.Claim()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stopDeadline)
	defer cancel()
	owner, state, took := cl.TookOver()
	if !took || state == claims.StateFinishing || g.prog.Done && len(g.prog.Aside) == 0 {
		if err := cl.Forget(ctx); err == nil {
			g.ended = true
		}
		return cause
	}
	attrs := []any{slog.String("segment", g.name), slog.String("previous_holder", owner),
		slog.Uint64("delivered", g.prog.Delivered), slog.Uint64("set_aside", g.prog.Quarantined+g.prog.Skipped)}
	for _, area := range []sink.Area{sink.AreaQuarantine, sink.AreaArchive} {
		there, err := sink.Exists(ctx, r.c.Reader, area, g.name)
		if err != nil {
			return err // released with its progress: looked for again
		}
		if !there {
			continue
		}
		// Finish finds it moved there already, and ends the claim as a
		// move there does: a quarantined segment's record keeps its
		// progress.
		if err := cl.Finish(ctx, claims.Destination{Area: area}); err != nil {
			return err
		}
		g.ended = true
		r.mw.Fail("moved_away")
		r.log.Warn("a segment this restorer claimed was moved by someone without its claim (a holder that stalled past its lease?); its progress stays with it",
			append(attrs, slog.String("area", area.String()))...)
		if area == sink.AreaQuarantine {
			g.rep.QuarantinedSegments++
		} else {
			r.countQuarantined(g.prog.Labels)
			g.rep.Segments++
		}
		return nil
	}
	if err := cl.Forget(ctx); err != nil {
		return err
	}
	g.ended = true
	g.rep.Gone++
	r.mw.Fail("gone")
	r.log.Warn("a segment this restorer claimed is in no area: removed by someone without its claim; the records its progress does not count as delivered or set aside are gone",
		attrs...)
	return nil
}
