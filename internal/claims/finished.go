package claims

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/dlqdump/dlqdump/sink"
)

// A finish decided, completed by whoever holds the claim next. Finish (and
// SaveFinal) records in its fencing write where the segment goes; a store
// cannot make the delete or move that follows conditional on the record,
// so a holder stalled past its lease between the two makes it late, after
// another took the claim over. Were the taker to restore the segment
// meanwhile, the late delete would lose what it had not delivered yet
// (uncounted: the holder's next write fails) and a late move to quarantine
// would keep a copy of what it delivered, to be delivered again on release.
// So a claim taken over a record that says finishing, with a destination,
// completes that decision (the same delete or move, then the record's end)
// and ends; the late delete or move of the stalled holder then finds the
// segment gone, which Finish takes for done, and its next write fails with
// ErrLeaseLost. Both do the same, whichever lands first.

// ErrFinished is wrapped by the *Finished a claim returns when it completed
// the finish its segment's previous holder decided.
var ErrFinished = errors.New("dlqdump: segment finished as its previous holder decided")

// Finished is the error Claimer.Claim (and ClaimNew, ClaimSeen) returns when
// the segment's record said that its holder was finishing it (deleting,
// archiving, quarantining it) and that holder stopped before it was done:
// the claim completed that finish and ended, so the segment is not the
// caller's to work on. The caller accounts for what was finished: the
// progress's counts, and To.Account. Claimer.Check returns one too, for a
// claim that would complete a finish (Pending).
type Finished struct {
	// Name is the segment's name.
	Name string
	// Owner is the label of the holder that decided.
	Owner string
	// To is where it decided the segment goes.
	To Destination
	// Progress is the progress its record held.
	Progress json.RawMessage
	// Gone: the segment was in neither the ready area nor To.Area (removed
	// meanwhile): the claim removed its record.
	Gone bool
	// Pending: returned by Check, nothing was done yet.
	Pending bool
}

// Error says what was finished, on whose decision.
func (f *Finished) Error() string {
	what := "completed"
	switch {
	case f.Pending:
		what = "would complete"
	case f.Gone:
		what = "found it gone, completing"
	}
	return fmt.Sprintf("%s: segment %s: %s the finish (%s) that %q decided before it stopped", ErrFinished, f.Name, what, f.To, f.Owner)
}

// Unwrap returns ErrFinished.
func (f *Finished) Unwrap() error { return ErrFinished }

// decided returns the finish a record holds, nil for none.
func decided(r *Record) *Destination {
	if r.State != StateFinishing {
		return nil
	}
	return r.To
}

// complete completes the finish prev, the record the claim took over,
// decided, and ends the claim: it returns a *Finished, or the error that
// kept it from completing (the decision stays in the record, released, for
// the next claim).
func (cl *Claim) complete(ctx context.Context, prev Record) error {
	fin := &Finished{Name: cl.name, Owner: prev.Owner, To: *prev.To, Progress: prev.Progress}
	err := cl.Finish(ctx, fin.To)
	switch {
	case err == nil:
	case errors.Is(err, sink.ErrNotFound):
		// Neither ready nor where it was to go: removed since.
		if err := cl.Forget(ctx); err != nil {
			return fmt.Errorf("dlqdump: claim %s: %w", cl.name, err)
		}
		fin.Gone = true
	default:
		if !errors.Is(err, ErrLeaseLost) {
			if rerr := cl.Release(ctx); rerr != nil {
				cl.c.log.Warn("releasing a claim failed; it is taken over after its lease", slog.String("segment", cl.name), slog.Any("error", rerr))
			}
		}
		return fmt.Errorf("dlqdump: claim %s: completing the finish (%s) that %q decided: %w", cl.name, fin.To, prev.Owner, err)
	}
	cl.c.log.Info("completed the finish of a segment that its previous holder decided before it stopped",
		slog.String("segment", cl.name), slog.String("decided_by", prev.Owner), slog.String("finish", fin.To.String()), slog.Bool("gone", fin.Gone))
	return fin
}
