package dlqdump

import (
	"fmt"
	"log/slog"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// A segment moved aside whole: quarantined when it cannot be restored as it
// is (damaged, a progress that cannot be trusted, another version), or, by
// the VersionPolicy, deleted or left in place.

// quarantineWhole moves the segment to quarantine with the reason; records
// counts its records when known. Its record keeps the progress.
func (g *segRun) quarantineWhole(label, reason string, records int) error {
	g.rep.QuarantinedSegments++
	g.rep.Quarantined += uint64(records)
	if g.dry {
		g.rep.ByReason["quarantine: "+label] += uint64(max(records, 1))
		return nil
	}
	g.r.log.Warn("quarantining a segment", slog.String("segment", g.name), slog.String("reason", reason))
	if g.prog.Started() && !g.lost() {
		if err := g.save(true); err != nil {
			return err
		}
	}
	to := claims.Destination{Area: sink.AreaQuarantine, Reason: reason}
	if records > 0 {
		// Counted by whoever completes the move: end, or the restorer
		// that takes the claim over if this one stalls before it.
		to = withAccount(to, finishAccount{Quarantined: map[string]uint64{label: uint64(records)}})
	}
	return g.end(to)
}

// versionMismatch applies the VersionPolicy to a segment of another version.
func (g *segRun) versionMismatch(v Version) error {
	r := g.r
	reason := fmt.Sprintf("version %s, restorer expects %s", v, r.c.Version)
	var records int
	if f := g.sr.Footer(); f != nil {
		records = int(f.Records)
	}
	switch {
	case g.filtered && r.c.VersionPolicy != VersionKeep:
		// A selective pass moves nothing it did not select: the policy
		// is for a pass over everything.
		g.rep.OtherVersionSegments++
		g.rep.Skipped += uint64(records)
		if !g.dry {
			r.log.Info("a selective pass leaves a segment of another version in place", slog.String("segment", g.name),
				slog.String("reason", reason), slog.Int("records", records))
		}
		return nil
	case r.c.VersionPolicy == VersionDelete:
		g.rep.DeletedSegments++
		if g.dry {
			g.rep.ByReason["delete: version "+v.String()] += uint64(records)
			return nil
		}
		r.log.Warn("deleting a segment of another version", slog.String("segment", g.name), slog.String("reason", reason), slog.Int("records", records))
		r.mw.Fail("version_deleted")
		return g.end(claims.Destination{Delete: true})
	case r.c.VersionPolicy == VersionKeep:
		if g.dry {
			return nil
		}
		r.mu.Lock()
		r.skip[g.name] = leftInPlace{reason: reason}
		r.mu.Unlock()
		r.log.Info("leaving a segment of another version in place", slog.String("segment", g.name), slog.String("reason", reason))
		return nil
	}
	return g.quarantineWhole("version", reason, records)
}
