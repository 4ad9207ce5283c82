package claims

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Claim is a claim taken by Claimer.Claim. Its methods write the record by
// compare-and-swap on the version they last wrote, so once another restorer
// took the claim over every method fails with ErrLeaseLost, and once
// Release, Finish or Forget succeeded, with an error wrapping sink.ErrClosed.
// A write that failed may have taken effect: the next call finds the record
// holding this claim's token and goes on from there. It is safe for
// concurrent use.
type Claim struct {
	c     *Claimer
	name  string
	found json.RawMessage // progress when taken
	state State           // state when taken
	token string          // the claim's token, as taken (rec.Token is cleared on release)
	// had: the claim was written over a record (prevOwner's, "" when it
	// was released or pending), not created.
	had       bool
	prevOwner string

	mu      sync.Mutex
	rec     Record // last written
	version string
	trusted time.Time // start of the last successful write
	moved   bool      // Finish moved or deleted the segment already
	lost    bool
	ended   bool
	// removing: a removal of the record was tried, and may have taken
	// effect unseen; removedUnseen: a later write found the record gone,
	// so it had, and the claim ended (a retried Finish or Forget succeeds).
	removing, removedUnseen bool
}

// Name returns the segment's name.
func (cl *Claim) Name() string { return cl.name }

// Control returns the request written into the record from outside, as the
// claim's last write found it ("" for none).
func (cl *Claim) Control() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.rec.Control
}

// Record returns the record as the claim last wrote it.
func (cl *Claim) Record() Record {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.rec
}

// lastProgress returns the progress of the last write.
func (cl *Claim) lastProgress() json.RawMessage {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.rec.Progress
}

// Progress returns the progress saved by the previous holder when the claim
// was taken (nil if none).
func (cl *Claim) Progress() json.RawMessage { return cl.found }

// WasQuarantined reports whether the previous holder moved the segment to
// quarantine (it was since released from there).
func (cl *Claim) WasQuarantined() bool { return cl.state == StateQuarantined }

// TookOver reports whether the claim was taken over a record that was
// there (a previous holder's, expired or released, with owner its label and
// state its state), rather than made anew: a segment found gone under such
// a claim was removed by someone, where one under a new record was finished
// by a holder since the listing.
func (cl *Claim) TookOver() (owner string, state State, ok bool) {
	return cl.prevOwner, cl.state, cl.had
}

// TrustedUntil returns until when the claim can be relied on: the start of
// its last successful write plus the lease less a fifth.
func (cl *Claim) TrustedUntil() time.Time {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.lost || cl.ended {
		return time.Time{}
	}
	return cl.trusted.Add(cl.c.lease - Margin(cl.c.lease))
}

// Margin is the part of a lease a holder does not rely on, for the latency of
// renewing and clocks running at slightly different rates.
func Margin(lease time.Duration) time.Duration { return lease / 5 }

// Save renews the lease and records progress (nil keeps the last one).
func (cl *Claim) Save(ctx context.Context, progress json.RawMessage) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	rec := cl.rec
	if progress != nil {
		rec.Progress = progress
	}
	return cl.writeLocked(ctx, "renew", rec)
}

// SaveFinal records progress after which nothing remains but Finish to
// to, and fences the claim in the same write, as Finish does first (the
// record is marked finishing, with to), so that a Finish to the same place
// within the claim's trusted time writes the record once less. While the
// claim has publications to settle it is Save: Finish settles them, then
// fences.
func (cl *Claim) SaveFinal(ctx context.Context, progress json.RawMessage, to Destination) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	rec := cl.rec
	if progress != nil {
		rec.Progress = progress
	}
	if len(rec.Publishing) == 0 {
		rec.State, rec.To = StateFinishing, &to
	}
	return cl.writeLocked(ctx, "renew", rec)
}

// Release ends the claim, keeping the last saved progress and any request
// written into the record from outside: the segment may be claimed by anyone
// at once and resumes there.
func (cl *Claim) Release(ctx context.Context) error {
	return cl.ReleaseDecided(ctx, func(control string) (json.RawMessage, string) { return nil, control })
}

// ReleaseDecided ends the claim as Release does, in one write of the
// progress (nil keeps the last) and request that decide returns for the
// request stored in the record (Control: "" for none). decide is called with
// the request the claim's last write found and, should the write meet a
// request written into the record since, again with that one: what is
// written was decided on the request it replaces, so that a request is
// acted on or kept, never overwritten unseen (the holder acknowledging one
// returns ""). A finish the claim decided (Finish, SaveFinal) stays
// decided: the next claim completes it.
func (cl *Claim) ReleaseDecided(ctx context.Context, decide func(control string) (progress json.RawMessage, keep string)) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	base := cl.rec
	err := cl.writeBuiltLocked(ctx, "release", func(control string) Record {
		rec := base
		progress, keep := decide(control)
		rec.Token, rec.Control = "", keep
		if rec.To == nil {
			rec.State = StateOpen
		}
		if progress != nil {
			rec.Progress = progress
		}
		return rec
	})
	if err != nil {
		return err
	}
	cl.ended = true
	return nil
}

// Destination says where Finish takes a segment. From the write that fences
// the finish on, the record holds it (Record.To).
type Destination struct {
	// Delete removes the segment; otherwise it is moved to Area.
	Delete bool `json:"delete,omitempty"`
	// Area is where the segment goes (archive, quarantine).
	Area sink.Area `json:"area,omitempty"`
	// Reason is kept with a segment moved to quarantine.
	Reason string `json:"reason,omitempty"`
	// Account is what completing the finish accounts for, opaque to this
	// package (the records a retention rule expires): whoever completes
	// it, the holder that decided or one that took its claim over (see
	// Finished), reports it, once.
	Account json.RawMessage `json:"account,omitempty"`
}

// String says what the destination does: "delete", "move to quarantine".
func (d Destination) String() string {
	if d.Delete {
		return "delete"
	}
	return "move to " + d.Area.String()
}

// same reports whether d and o do the same to a segment (their Reasons may
// differ).
func (d Destination) same(o Destination) bool {
	return d.Delete == o.Delete && (d.Delete || d.Area == o.Area) && bytes.Equal(d.Account, o.Account)
}

// Finish ends the work on a ready segment: it fences the claim (the record
// is marked finishing, with to, so a claim taken over fails here, before
// anything changes), deletes the segment or moves it, and then removes the
// record, except for a segment moved to quarantine, whose record keeps its
// progress (state quarantined, released) so that releasing it from
// quarantine never feeds delivered records again. Each step can be
// repeated: a Finish that failed may be called again, by this holder or,
// after the lease, by the one who takes the claim over.
//
// No store makes a delete or a move conditional on a record, so a holder
// that stalls past its lease between the fencing write and the delete or
// move, and then goes on, makes it all the same. What it makes is the
// decision the record holds, though: whoever takes the claim over completes
// that decision (Claimer.Claim returns a *Finished) instead of working on
// the segment, so the late delete or move finds it done (ErrNotFound,
// ignored) and the holder's next write fails with ErrLeaseLost. A segment
// is not restored by one holder while another deletes or quarantines it.
// What remains is a stall that outlasts the taker's completing the move to
// quarantine, a person releasing the segment and a new claim on it: the
// late move then takes the segment from under that claim; a restorer that
// finds its segment gone looks for it and ends its claim in quarantine with
// its progress (dlqdump's segRun.gone), unless it had read the segment
// whole already from a file it kept open.
func (cl *Claim) Finish(ctx context.Context, to Destination) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.takeRemovedUnseenLocked() {
		return nil // the record's removal had gone through
	}
	if err := cl.usableLocked("finish"); err != nil {
		return err
	}
	if cl.moved {
		return cl.endLocked(ctx, to) // a retry after the segment moved
	}
	// What the claim decided to publish goes into place before the
	// segment goes: side segments and copies need their parent's record
	// no more once it is finished.
	if err := cl.settleLocked(ctx); err != nil {
		return err
	}
	if len(cl.rec.Publishing) > 0 {
		return fmt.Errorf("dlqdump: finish segment %s: it is being handed over to %s (dlqdump mv): run that move again", cl.name, cl.rec.Publishing[0].Remote)
	}
	// SaveFinal (or the claim's taking over a decided finish) fenced it
	// already, for the same place, and no one can have taken the claim
	// over while it is trusted.
	if !cl.fencedLocked(to) {
		rec := cl.rec
		rec.State, rec.To = StateFinishing, &to
		if err := cl.writeLocked(ctx, "finish", rec); err != nil {
			return err
		}
	}
	st := cl.c.store
	var err error
	if to.Delete {
		// Gone already is fine: deleted by an earlier attempt.
		err = sink.Discard(ctx, st, sink.AreaReady, cl.name)
	} else {
		err = st.Move(ctx, cl.name, sink.AreaReady, to.Area, to.Reason)
		if errors.Is(err, sink.ErrNotFound) && cl.present(ctx, to.Area) {
			err = nil // moved by an earlier attempt
		}
	}
	if err != nil {
		return fmt.Errorf("dlqdump: finish segment %s: %w", cl.name, err)
	}
	cl.moved = true
	return cl.endLocked(ctx, to)
}

// fencedLocked reports whether the record, as the claim last wrote it,
// fences a finish to to, and is trusted still.
func (cl *Claim) fencedLocked(to Destination) bool {
	r := &cl.rec
	return r.State == StateFinishing && r.To != nil && r.To.same(to) &&
		cl.c.now().Before(cl.trusted.Add(cl.c.lease-Margin(cl.c.lease)))
}

// endLocked ends the claim once the segment was moved or deleted.
func (cl *Claim) endLocked(ctx context.Context, to Destination) error {
	if !to.Delete && to.Area == sink.AreaQuarantine {
		rec := cl.rec
		rec.Token, rec.State, rec.To = "", StateQuarantined, nil
		if err := cl.writeLocked(ctx, "finish", rec); err != nil {
			return err
		}
		cl.ended = true
		return nil
	}
	return cl.deleteLocked(ctx)
}

// present reports whether the segment is in area.
func (cl *Claim) present(ctx context.Context, area sink.Area) bool {
	ok, err := sink.Exists(ctx, cl.c.store, area, cl.name)
	return ok && err == nil
}

// Forget ends a claim by removing its record: for a segment that turned out
// to be gone (an earlier holder finished it), or one left as it was.
func (cl *Claim) Forget(ctx context.Context) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.takeRemovedUnseenLocked() {
		return nil
	}
	if err := cl.usableLocked("forget"); err != nil {
		return err
	}
	return cl.deleteLocked(ctx)
}

// takeRemovedUnseenLocked reports, once, whether a write found that an
// earlier removal of the record had taken effect unseen: the call retrying
// that removal succeeds.
func (cl *Claim) takeRemovedUnseenLocked() bool {
	if !cl.removedUnseen {
		return false
	}
	cl.removedUnseen = false
	return true
}

func (cl *Claim) deleteLocked(ctx context.Context) error {
	retry := cl.removing
	cl.removing = true
	err := cl.c.recs.DeleteRecord(ctx, cl.name, cl.version)
	if errors.Is(err, sink.ErrNotFound) {
		if !retry {
			// Not removed by an earlier attempt of ours: by whoever
			// took the claim over while this holder was stopped.
			return cl.lostLocked("finish", fmt.Errorf("its record was removed by another holder: %w", err))
		}
		err = nil // removed by an earlier attempt
	}
	if err != nil {
		if errors.Is(err, sink.ErrConflict) {
			return cl.lostLocked("finish", err)
		}
		return fmt.Errorf("dlqdump: remove the record of segment %s: %w", cl.name, err)
	}
	cl.ended = true
	return nil
}

func (cl *Claim) usableLocked(op string) error {
	if cl.lost {
		return fmt.Errorf("%w: %s segment %s: the claim was taken over", ErrLeaseLost, op, cl.name)
	}
	if cl.ended {
		return fmt.Errorf("%w: %s segment %s: the claim already ended", sink.ErrClosed, op, cl.name)
	}
	return nil
}

func (cl *Claim) lostLocked(op string, cause error) error {
	cl.lost = true
	return fmt.Errorf("%w: %s segment %s: %w", ErrLeaseLost, op, cl.name, cause)
}

// writeLocked writes rec (its Rev raised above the stored one) if the record
// is still ours, keeping the request from outside it finds there.
func (cl *Claim) writeLocked(ctx context.Context, op string, rec Record) error {
	return cl.writeBuiltLocked(ctx, op, func(control string) Record {
		r := rec
		r.Control = control
		return r
	})
}

// writeBuiltLocked writes the record build makes for the request from
// outside stored in it (the one the last write found, then the one a
// conflicting write finds), if the record is still ours.
func (cl *Claim) writeBuiltLocked(ctx context.Context, op string, build func(control string) Record) error {
	if err := cl.usableLocked(op); err != nil {
		return err
	}
	control := cl.rec.Control
	for range 3 {
		rec := build(control)
		rec.Rev = cl.rec.Rev + 1
		rec.Written = time.Now().UTC()
		b := rec.marshal()
		start := cl.c.now()
		version, err := cl.c.recs.WriteRecord(ctx, cl.name, b, cl.version)
		if err == nil {
			cl.rec, cl.version, cl.trusted = rec, version, start
			return nil
		}
		// Failed, or took effect and reported failure, or another
		// restorer wrote: the record tells which.
		cur, curVersion, rerr := cl.c.recs.ReadRecord(ctx, cl.name)
		switch {
		case errors.Is(rerr, sink.ErrNotFound) && cl.removing:
			// Our own removal of the record went through, its answer
			// lost: the claim ended.
			cl.ended, cl.removedUnseen = true, true
			return fmt.Errorf("%w: %s segment %s: the claim ended: its record was removed by an earlier attempt", sink.ErrClosed, op, cl.name)
		case errors.Is(rerr, sink.ErrNotFound):
			return cl.lostLocked(op, fmt.Errorf("the record was removed: %w", err))
		case rerr != nil:
			return fmt.Errorf("dlqdump: %s segment %s: %w", op, cl.name, errors.Join(err, rerr))
		case string(cur) == string(b):
			cl.rec, cl.version, cl.trusted = rec, curVersion, start
			return nil // this very write went through
		}
		r, ok := Parse(cur)
		if !ok || r.Token != cl.rec.Token {
			by := "a damaged record"
			if ok {
				by = fmt.Sprintf("%q", r.Owner)
			}
			return cl.lostLocked(op, fmt.Errorf("taken over by %s", by))
		}
		if !errors.Is(err, sink.ErrConflict) {
			return fmt.Errorf("dlqdump: %s segment %s: %w", op, cl.name, err)
		}
		// An earlier write of ours went through after reporting
		// failure, or a request was written into the record from
		// outside: go on from it, keeping the request.
		cl.rec.Rev, cl.version = r.Rev, curVersion
		control = r.Control
	}
	return fmt.Errorf("dlqdump: %s segment %s: its record keeps changing", op, cl.name)
}
