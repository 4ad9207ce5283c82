package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Segments are immutable: rewrap and summarize replace one by a copy
// published under a new name, then delete the original. This file holds
// that replacement, once for both.

// segCopy describes the copy a copyWriter wrote, for its publish.
type segCopy struct {
	name   string
	shift  int64  // what the copy's offsets add to the original's
	key    []byte // the data key, the same in both; nil if not encrypted
	origID segment.ID
	copyID segment.ID
}

// copyWriter writes the copy of a segment into the segment create starts
// for the copy's name, and calls publish to publish it (publish commits
// sw).
type copyWriter func(create func(name string) (sink.SegmentWriter, error), publish func(sw sink.SegmentWriter, c segCopy) error) error

// replace replaces the segment si by the copy write makes and returns the
// copy's name.
func (a *app) replace(l *location, si sink.Info, write copyWriter) (string, error) {
	if si.Area == sink.AreaArchive {
		return a.replaceArchived(l, si, write)
	}
	return a.replaceClaimed(l, si, write)
}

// replaceArchived replaces an archived segment: no restorer takes it, so
// the copy is published and the original deleted.
func (a *app) replaceArchived(l *location, si sink.Info, write copyWriter) (string, error) {
	var newName string
	create := func(name string) (sink.SegmentWriter, error) { return l.reader.Create(a.ctx, si.Area, name) }
	err := write(create, func(sw sink.SegmentWriter, c segCopy) error {
		newName = c.name
		return sw.Commit(a.ctx)
	})
	if err != nil {
		return "", err
	}
	if err := l.reader.Delete(a.ctx, si.Area, si.Name); err != nil && !errors.Is(err, sink.ErrNotFound) {
		return newName, fmt.Errorf("the copy %s is published, but deleting the original failed: %w", newName, err)
	}
	return newName, nil
}

// replaceClaimed replaces a ready segment under a claim: the copy is
// published pending on the original, which names it in its progress, so
// that a restorer taking the original over finishes it once the copy is
// there; then the original is removed. Its restore progress moves to the
// copy: an interrupted replacement never delivers a record twice.
func (a *app) replaceClaimed(l *location, si sink.Info, write copyWriter) (string, error) {
	ctx := a.ctx
	claimer, err := a.claimerOf(l)
	if err != nil {
		return "", err
	}
	cl, err := claimer.Claim(ctx, si.Name)
	if err != nil {
		// A *claims.Finished says that its holder had decided to
		// finish it (delete, archive, quarantine it) and stopped: that
		// was completed instead.
		return "", err
	}
	keep := claims.Keep(ctx, cl, a.logger())
	ended := false
	defer func() {
		keep.Stop()
		if !ended && !keep.Lost() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
			defer cancel()
			_ = cl.Release(rctx)
		}
	}()
	prog, err := claims.ParseProgress(cl.Progress())
	switch {
	case err != nil:
		return "", err
	case prog.InFlight():
		return "", fmt.Errorf("a restore of it is in flight (records set aside or carved, side segments being written, or done): restore it first")
	}
	finish := func() error {
		keep.Stop()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := cl.Finish(fctx, claims.Destination{Delete: true}); err != nil {
			return fmt.Errorf("the copy %s is published, but removing the original failed (a restorer taking it over removes it): %w", prog.Successor, err)
		}
		ended = true
		return nil
	}
	if prog.Successor != "" {
		// An earlier replacement published its copy, or did not. The
		// progress naming it must be that replacement's, signed with
		// the segment's key: anyone who can write to the store could
		// name another segment.
		if err := a.checkProgress(l, si, cl.Progress()); err != nil {
			return "", err
		}
		if f, err := l.reader.Open(ctx, sink.AreaReady, prog.Successor); err == nil {
			f.Close()
			return prog.Successor, finish()
		}
	}
	marshal := func(p claims.Progress, key []byte, id segment.ID) []byte {
		if key == nil {
			return p.Marshal()
		}
		return p.MarshalSigned(key, id)
	}
	var newName string
	// The copy is staged under a name of this claim's and published only
	// if the claim still holds (claims.Claim.Publish): a replacement that
	// stalls past its lease never publishes its copy after a restorer
	// took the original over.
	stage := func(name string) (sink.SegmentWriter, error) {
		return l.reader.Create(ctx, sink.AreaStaging, cl.StagedName(name))
	}
	publish := func(sw sink.SegmentWriter, c segCopy) error {
		// The progress moves to the copy, signed anew: only one that
		// authenticates, or a progress forged in the store would be
		// signed with the key.
		if !prog.Empty() && c.key != nil {
			if err := claims.VerifyProgress(cl.Progress(), c.key, c.origID); err != nil {
				return fmt.Errorf("%w: restore it first (a restorer moves it to quarantine)", err)
			}
		}
		// The copy's record first: pending on the original, with the
		// progress moved by the shift.
		p := prog
		p.Successor = ""
		if p.Offset != 0 { // (0, 0) is the start in any segment
			p.Offset += c.shift
		}
		rec := claims.Record{V: claims.Version, Rev: 1, State: claims.StatePending, Parent: si.Name, Written: time.Now().UTC()}
		if p.Started() {
			rec.Progress = marshal(p, c.key, c.copyID)
		}
		if err := a.putRecord(l, c.name, &rec); err != nil {
			return err
		}
		if err := sw.Commit(ctx); err != nil {
			return err
		}
		// Then, in one write of the claim's record, the original names
		// its copy and the copy is published: a restorer taking the
		// original over finds the copy in place and removes the original.
		prog.Successor = c.name
		newName = c.name
		return keep.Publish(ctx, claims.Publication{Staged: cl.StagedName(c.name), Name: c.name, Area: sink.AreaReady}, marshal(prog, c.key, c.origID))
	}
	if err := write(stage, publish); err != nil {
		return "", err
	}
	return newName, finish()
}
