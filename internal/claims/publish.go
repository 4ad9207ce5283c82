package claims

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/dlqdump/dlqdump/sink"
)

// Fenced publishing. A holder can stall (a GC pause, SIGSTOP, a VM
// migration, a slow upload) past its lease while another takes its claim
// over, and then go on. Whatever it makes visible on behalf of the claim (a
// side segment, a rewrapped copy, a copy in another store) must then stay
// invisible, on every sink, although no store offers a write conditional on
// another object. So a segment is published in three steps:
//
//  1. it is written into sink.AreaStaging under a name only this claim
//     uses (StagedName: the claim's token, then the segment's name), where
//     no restorer looks;
//  2. the claim's record says so (Publish): a compare-and-swap on the
//     version this holder last wrote, which fails once the claim was taken
//     over, so only a live holder can decide;
//  3. the staged segment is moved into place (sink.Reader.Unstage), by the
//     holder right after, or by whoever takes the claim over and finds the
//     decision in the record.
//
// A holder that stalls before step 2 loses the decision: what it staged stays
// staged, and SweepStaging removes it. One that stalls after step 2 finds its
// staged segment moved already by the taker (Unstage fails with
// sink.ErrNotFound), and its next write of the record fails. No holder moves
// a staged segment of another claim, so a late move never publishes a copy
// somebody else left behind.

// Publication is a segment published on behalf of a claim (see Publish),
// kept in the record from the decision until it is moved into place.
type Publication struct {
	// Staged is its name in sink.AreaStaging (StagedName).
	Staged string `json:"staged"`
	// Name and Area are where it is published.
	Name string    `json:"name"`
	Area sink.Area `json:"area"`
	// Reason is kept with a segment published into quarantine.
	Reason string `json:"reason,omitempty"`
	// Remote, when set, names the store the segment is staged in (the
	// destination of dlqdump mv), which this store's restorers cannot
	// reach: the claim's holder there moves it into place and says so
	// with Unstaged. While a record holds a remote publication, its
	// segment is handed over and no restorer restores it.
	Remote string `json:"remote,omitempty"`
}

// stagedPrefixLen is how much of a claim's token starts its staged names.
const stagedPrefixLen = 16

// StagedName returns the name under which this claim stages the segment
// name: a prefix of the claim's token, so that no two claims stage under one
// name and a holder never moves what another left.
func (cl *Claim) StagedName(name string) string {
	return cl.token[:stagedPrefixLen] + "-" + name
}

// ParseStagedName splits a staged name into the token prefix of the claim
// that staged it and the name it is published under.
func ParseStagedName(staged string) (token, name string, ok bool) {
	token, name, ok = strings.Cut(staged, "-")
	if !ok || len(token) != stagedPrefixLen || name == "" {
		return "", "", false
	}
	return token, name, true
}

// Publish decides to publish p, staged already, on behalf of the claim (with
// progress, unless nil, saved in the same write), and moves it into place
// unless it is Remote. The decision is a write of the record that fails with
// ErrLeaseLost once the claim was taken over: then nothing is published. A
// segment of p's name already there (an earlier attempt's copy of the same
// records) is kept and the staged one removed.
func (cl *Claim) Publish(ctx context.Context, p Publication, progress []byte) error {
	if _, _, ok := ParseStagedName(p.Staged); !ok || !strings.HasPrefix(p.Staged, cl.token[:stagedPrefixLen]) {
		return fmt.Errorf("dlqdump: publish %s: staged as %q, not under this claim's StagedName", p.Name, p.Staged)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	rec := cl.rec
	rec.Publishing = append(slices.DeleteFunc(slices.Clone(rec.Publishing), func(q Publication) bool { return q.Staged == p.Staged }), p)
	if progress != nil {
		rec.Progress = progress
	}
	if err := cl.writeLocked(ctx, "publish", rec); err != nil {
		return err
	}
	if p.Remote != "" {
		return nil
	}
	return cl.unstageLocked(ctx, p)
}

// Unstaged records that the remote publication staged as staged was moved
// into place by the caller: the record drops it with its next write.
func (cl *Claim) Unstaged(staged string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.dropLocked(staged)
}

// Remote returns the record's remote publications: while there is one, the
// segment is being handed over to another store.
func (cl *Claim) Remote() []Publication {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var out []Publication
	for _, p := range cl.rec.Publishing {
		if p.Remote != "" {
			out = append(out, p)
		}
	}
	return out
}

// settleLocked moves into place every local publication the record still
// holds (decided by this holder or by one before it); the first failure is
// returned, and the publication stays for the next try.
func (cl *Claim) settleLocked(ctx context.Context) error {
	for _, p := range slices.Clone(cl.rec.Publishing) {
		if p.Remote != "" {
			continue
		}
		if err := cl.unstageLocked(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// unstageLocked moves a decided publication into place and drops it from
// the record (with the next write).
func (cl *Claim) unstageLocked(ctx context.Context, p Publication) error {
	st := cl.c.store
	err := st.Unstage(ctx, p.Staged, p.Name, p.Area, p.Reason)
	switch {
	case err == nil:
	case errors.Is(err, sink.ErrExist):
		// An earlier attempt published the same records under that
		// name: keep that copy.
		cl.c.log.Info("a segment published on behalf of a claim was there already; dropping the staged copy",
			slog.String("segment", cl.name), slog.String("published", p.Name), slog.String("area", p.Area.String()))
		if err := st.Delete(ctx, sink.AreaStaging, p.Staged); err != nil && !errors.Is(err, sink.ErrNotFound) {
			return fmt.Errorf("dlqdump: segment %s: remove the staged copy of %s: %w", cl.name, p.Name, err)
		}
	case errors.Is(err, sink.ErrNotFound):
		// Moved into place by an earlier attempt, or by the holder
		// before a takeover.
		if !cl.presentAnywhere(ctx, p.Name) {
			cl.c.log.Warn("a segment published on behalf of a claim is neither staged nor in place (removed since?)",
				slog.String("segment", cl.name), slog.String("published", p.Name), slog.String("area", p.Area.String()))
		}
	default:
		return fmt.Errorf("dlqdump: segment %s: publish %s into %s: %w", cl.name, p.Name, p.Area, err)
	}
	cl.dropLocked(p.Staged)
	return nil
}

func (cl *Claim) dropLocked(staged string) {
	cl.rec.Publishing = slices.DeleteFunc(slices.Clone(cl.rec.Publishing), func(q Publication) bool { return q.Staged == staged })
}

// presentAnywhere reports whether a segment named name is in any area.
func (cl *Claim) presentAnywhere(ctx context.Context, name string) bool {
	for _, a := range []sink.Area{sink.AreaReady, sink.AreaQuarantine, sink.AreaArchive} {
		if ok, _ := cl.c.present(ctx, a, name); ok {
			return true
		}
	}
	return false
}

// SweepStaging removes what is staged and will never be published: a
// segment staged by a claim that ended or was taken over before deciding to
// publish it (its holder stalled or died), or left behind after a copy was
// published. It reports how many it removed. A staged segment whose record
// says it is a copy from another store (Record.Staged) is kept for the
// command that publishes it, until this Claimer has seen that record
// unchanged for MaxLease: a command that died then runs again, and copies
// the segment anew if its staged copy is gone.
func (c *Claimer) SweepStaging(ctx context.Context) (int, error) {
	var names []string
	for n, err := range sink.Names(ctx, c.store, sink.AreaStaging) {
		if err != nil {
			return 0, err
		}
		names = append(names, n)
	}
	removed := 0
	for _, staged := range names {
		dead, err := c.deadStaged(ctx, staged)
		if err != nil {
			return removed, err
		}
		if !dead {
			continue
		}
		err = c.store.Delete(ctx, sink.AreaStaging, staged)
		if errors.Is(err, sink.ErrNotFound) {
			continue // moved into place meanwhile
		}
		if err != nil {
			return removed, err
		}
		removed++
		c.log.Info("removed a staged segment that will not be published (its claim was taken over or ended first)", slog.String("staged", staged))
	}
	return removed, nil
}

// deadStaged reports whether the staged segment will never be published.
func (c *Claimer) deadStaged(ctx context.Context, staged string) (bool, error) {
	token, name, ok := ParseStagedName(staged)
	if !ok {
		return false, nil // not staged by a claim: left alone
	}
	data, version, err := c.recs.ReadRecord(ctx, name)
	if errors.Is(err, sink.ErrNotFound) {
		// Every publication's record is written before it is staged:
		// the record is gone, so was its claim.
		return true, nil
	}
	if err != nil {
		return false, err
	}
	rec, ok := Parse(data)
	switch {
	case !ok:
		return false, nil
	case rec.Staged == staged:
		// A copy from another store: its command publishes it, or
		// copies it anew if it is gone.
		return c.expired("staged "+staged, version, MaxLease), nil
	case rec.State != StatePending || rec.Parent == "":
		return true, nil // published and claimed since: a leftover
	}
	pdata, _, err := c.recs.ReadRecord(ctx, rec.Parent)
	if errors.Is(err, sink.ErrNotFound) {
		return true, nil // the parent is done
	}
	if err != nil {
		return false, err
	}
	parent, ok := Parse(pdata)
	if !ok {
		return false, nil
	}
	if strings.HasPrefix(parent.Token, token) {
		return false, nil // its claim holds, and may still decide
	}
	for _, p := range parent.Publishing {
		if p.Staged == staged {
			return false, nil // decided, to be moved into place
		}
	}
	return true, nil
}
