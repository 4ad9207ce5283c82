package dlqdump

import (
	"encoding/json"
	"log/slog"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// What finishing a segment accounts for, counted once by whoever completes
// the finish: the holder that decided it, or, when that holder stalled past
// its lease between its fencing write and the delete or move, the one that
// took its claim over and completed the decision (claims.Finished).

// finishAccount is what a finish accounts for besides the progress's counts,
// kept with the decision in the claim record (claims.Destination.Account).
type finishAccount struct {
	// Quarantined counts, by label, the records of a segment moved to
	// quarantine whole (its version, a progress that cannot be trusted).
	Quarantined map[string]uint64 `json:"quarantined,omitempty"`
	// Expired is the segment a retention rule expires.
	Expired *ExpiredSegment `json:"expired,omitempty"`
}

// withAccount returns to with a carrying what it accounts for.
func withAccount(to claims.Destination, a finishAccount) claims.Destination {
	if len(a.Quarantined) > 0 || a.Expired != nil {
		to.Account, _ = json.Marshal(a) // marshals always
	}
	return to
}

// parseAccount reads what a destination accounts for; a damaged one counts
// nothing.
func parseAccount(to claims.Destination) finishAccount {
	var a finishAccount
	if len(to.Account) > 0 {
		_ = json.Unmarshal(to.Account, &a)
	}
	return a
}

// account counts what a finish to to accounts for, prog being the
// segment's progress: the records it set aside for quarantine, and those a
// retention rule expired.
func (r *Restorer) account(to claims.Destination, prog *claims.Progress) {
	if prog != nil {
		r.countQuarantined(prog.Labels)
	}
	a := parseAccount(to)
	r.countQuarantined(a.Quarantined)
	if a.Expired != nil {
		r.countExpired(*a.Expired)
	}
}

// countExpired counts and logs a segment a retention rule removed.
func (r *Restorer) countExpired(ex ExpiredSegment) {
	r.mw.Expire(ex.Area, ex.Rule, int(ex.Records))
	r.log.Warn("expired a segment", slog.String("segment", ex.Name), slog.String("area", ex.Area), slog.String("rule", ex.Rule),
		slog.Uint64("records", ex.Records), slog.Time("oldest", ex.Oldest), slog.Time("newest", ex.Newest), slog.Int64("bytes", ex.Bytes))
}

// completed accounts for a finish a claim completed on its previous
// holder's decision (the holder stalled, or was stopped, between deciding
// and deleting or moving the segment, and its claim was taken over), and
// returns what it accounted for. rep, when not nil, reports it as one of
// the pass's own finishes.
func (r *Restorer) completed(fin *claims.Finished, rep *Report) finishAccount {
	var prog *claims.Progress
	if p, err := claims.ParseProgress(fin.Progress); err == nil {
		prog = &p
	}
	a := parseAccount(fin.To)
	if !fin.Gone {
		r.account(fin.To, prog)
	}
	r.log.Warn("a segment's previous holder decided how to finish it and stopped before it was done; completed that instead of restoring it",
		slog.String("segment", fin.Name), slog.String("decided_by", fin.Owner), slog.String("finish", fin.To.String()),
		slog.String("reason", fin.To.Reason), slog.Bool("gone", fin.Gone))
	if rep == nil {
		return a
	}
	rep.Completed++
	switch {
	case fin.Gone || a.Expired != nil:
	case fin.To.Delete || fin.To.Area == sink.AreaArchive:
		rep.Segments++
	case fin.To.Area == sink.AreaQuarantine:
		rep.QuarantinedSegments++
	}
	return a
}
