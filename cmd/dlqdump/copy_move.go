package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// copyPlain copies a segment's bytes (cp of any area; mv of a quarantined or
// archived one, which no restorer claims) and, with move, deletes the source.
// mv carries a quarantined segment's record along: written in DST before the
// copy is published there, removed from SRC just before the source.
func (c *copier) copyPlain(si sink.Info) (res copyResult, err error) {
	ctx := c.a.ctx
	srcPath := c.src.segPath(si.Area, si.Name)
	var rec []byte // the record to carry
	var recVersion string
	if c.move && si.Area == sink.AreaQuarantine {
		rec, recVersion, err = c.src.reader.ReadRecord(ctx, si.Name)
		if errors.Is(err, sink.ErrNotFound) {
			rec, err = nil, nil
		}
		if err != nil {
			return res, fmt.Errorf("read the claim record of %s: %w", srcPath, err)
		}
	}
	if !c.move {
		res.notes = append(res.notes, c.cpNotes(si)...)
	}
	prepare := func(sameThere bool) error {
		if rec == nil {
			return nil
		}
		return c.putRecord(si, rec, sameThere)
	}
	res, err = c.transfer(si, prepare, res)
	if err != nil || !c.move {
		return res, err
	}
	// The record first: interrupted here, the source is still listed and
	// the next mv finishes the move (its record is in DST already).
	if rec != nil {
		err := c.src.reader.DeleteRecord(ctx, si.Name, recVersion)
		if err != nil && !errors.Is(err, sink.ErrNotFound) {
			return res, fmt.Errorf("copied to %s, but removing the claim record of the source %s failed: %w", c.dst.segPath(si.Area, si.Name), srcPath, err)
		}
	}
	if err := c.src.reader.Delete(ctx, si.Area, si.Name); err != nil && !errors.Is(err, sink.ErrNotFound) {
		return res, fmt.Errorf("copied to %s, but deleting the source %s failed: %w", c.dst.segPath(si.Area, si.Name), srcPath, err)
	}
	return res, nil
}

// cpNotes says what cp copies that a restorer handled already.
func (c *copier) cpNotes(si sink.Info) []string {
	v := c.records[si.Name]
	if v == nil {
		return nil
	}
	var notes []string
	if v.Rec.Held() {
		notes = append(notes, fmt.Sprintf("a restorer (%s) holds its claim: the records it delivers are in the copy too", v.Rec.Owner))
	}
	if v.Started() && v.Prog.Delivered > 0 {
		notes = append(notes, fmt.Sprintf("a restorer already delivered %d of its records; they are in the copy too (cp copies bytes; mv carries the restore progress)", v.Prog.Delivered))
	}
	return notes
}

// moveReady moves a ready segment: it claims it, so that no restorer takes
// it meanwhile, writes its restore progress (if any) into DST's record,
// released, stages the copy in DST, and publishes it there only once the
// claim's record in SRC says so (a fenced publish: a mv that stalls past its
// lease while a restorer takes the segment over never publishes its copy);
// then it deletes the source. From that decision on, no restorer in SRC
// restores the segment: an interrupted mv is completed by running it again.
func (c *copier) moveReady(si sink.Info) (res copyResult, err error) {
	a, ctx := c.a, c.a.ctx
	srcPath := c.src.segPath(si.Area, si.Name)
	claimer, err := a.claimerOf(c.src)
	if err != nil {
		return res, err
	}
	cl, err := claimer.Claim(ctx, si.Name)
	if errors.Is(err, claims.ErrClaimed) {
		return res, errClaimedSeg
	}
	if errors.Is(err, claims.ErrFinished) {
		// Its holder had decided to finish it (delete, archive,
		// quarantine it) and stopped: that was completed instead.
		return res, fmt.Errorf("%s not moved: %w", srcPath, err)
	}
	if err != nil {
		return res, fmt.Errorf("claim %s: %w", srcPath, err)
	}
	keep := claims.Keep(ctx, cl, a.logger())
	ended := false
	defer func() {
		keep.Stop()
		if ended || keep.Lost() {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if rerr := cl.Release(rctx); rerr != nil && !errors.Is(rerr, claims.ErrLeaseLost) {
			err = errors.Join(err, fmt.Errorf("release the claim on %s: %w", srcPath, rerr))
		}
	}()
	finish := func() error {
		keep.Stop()
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		if err := cl.Finish(fctx, claims.Destination{Delete: true}); err != nil {
			if errors.Is(err, claims.ErrLeaseLost) {
				ended = true
				return fmt.Errorf("moved to %s, but the claim on %s was taken over before it was deleted (no restorer restores it: run mv again to delete it): %w", c.dst, srcPath, err)
			}
			return fmt.Errorf("moved to %s, but deleting the source %s failed (run mv again): %w", c.dst, srcPath, err)
		}
		ended = true
		return nil
	}
	// A move decided by an earlier mv, interrupted: complete it.
	for _, p := range cl.Remote() {
		if p.Remote != c.dst.id() {
			return res, fmt.Errorf("%s is being moved to %s by an earlier mv: run that one again", srcPath, p.Remote)
		}
		done, err := c.unstage(si, p.Staged)
		if err != nil {
			return res, err
		}
		cl.Unstaged(p.Staged)
		if done {
			res.notes = append(res.notes, "completed a move an earlier mv began")
			return res, finish()
		}
		// Its staged copy is gone: the segment is copied again.
	}
	progress := cl.Progress()
	v := &claimView{}
	v.Prog, v.ProgErr = claims.ParseProgress(progress)
	if v.ProgErr == nil && v.Prog.WritingSides() {
		// Its side segments are reserved here, pending on it: moved,
		// it would write them there too.
		return res, fmt.Errorf("%s not moved: a restore of it is writing side segments (records carved or set aside being copied out of it): restore it first", srcPath)
	}
	started := v.ProgErr != nil || v.Started()
	if _, ok := c.existing[si.Area][si.Name]; ok {
		// A copy with the same bytes is there already (cp'd there):
		// the source goes, DST's record is DST's truth.
		if err := c.mustBeSame(si); err != nil {
			return res, err
		}
		res.same = true
		return res, finish()
	}
	staged := cl.StagedName(si.Name)
	rec := claims.Record{V: claims.Version, Owner: claimer.Owner(), Rev: 1, LeaseMS: a.lease.Milliseconds(),
		Written: time.Now().UTC(), Progress: progress, Staged: staged}
	if !started {
		rec.Progress = nil
	}
	data, err := json.Marshal(&rec)
	if err != nil {
		return res, err
	}
	if err := c.putRecord(si, data, false); err != nil {
		return res, err
	}
	size, err := c.copyBytes(si, sink.AreaStaging, staged)
	if err != nil {
		return res, err
	}
	res.size = size
	err = keep.Publish(ctx, claims.Publication{Staged: staged, Name: si.Name, Area: sink.AreaReady, Remote: c.dst.id()}, nil)
	if errors.Is(err, claims.ErrLeaseLost) {
		ended = true
		return res, c.lostWhileCopying(si, staged, err)
	}
	if err != nil {
		return res, fmt.Errorf("record the move of %s: %w", srcPath, err)
	}
	if _, err := c.unstage(si, staged); err != nil {
		return res, err
	}
	cl.Unstaged(staged)
	if started {
		what := "its restore progress (damaged: a restore there quarantines it, as it would here)"
		if v.ProgErr == nil {
			what = fmt.Sprintf("its restore progress (%s): a restore in %s resumes there", v.Counts(0, false), c.dst)
		}
		res.notes = append(res.notes, "moved with "+what)
	}
	return res, finish()
}

// unstage publishes the copy staged in DST as staged under the segment's
// name; done is false when neither the staged copy nor the segment is
// there (it must be copied again).
func (c *copier) unstage(si sink.Info, staged string) (done bool, err error) {
	ctx := c.a.ctx
	err = c.dst.reader.Unstage(ctx, staged, si.Name, sink.AreaReady, "")
	if errors.Is(err, sink.ErrNotFound) {
		f, oerr := c.dst.reader.Open(ctx, sink.AreaReady, si.Name)
		if oerr == nil {
			_ = f.Close()
			return true, nil // published by an earlier attempt
		}
		if errors.Is(oerr, sink.ErrNotFound) {
			return false, nil
		}
		return false, oerr
	}
	if err != nil {
		return false, fmt.Errorf("publish %s: %w", c.dst.segPath(si.Area, si.Name), err)
	}
	return true, nil
}

// gone reports whether a segment is no longer in its area of SRC.
func (c *copier) gone(si sink.Info) bool {
	f, err := c.src.reader.Open(c.a.ctx, si.Area, si.Name)
	if err == nil {
		_ = f.Close()
	}
	return errors.Is(err, sink.ErrNotFound)
}

// lostWhileCopying handles a claim taken over while its segment was copied:
// a restorer in SRC restores it now, so the copy staged in DST is never
// published; it is removed, with the record written for it.
func (c *copier) lostWhileCopying(si sink.Info, staged string, cause error) error {
	err := fmt.Errorf("lost the claim on %s while moving it (a restorer took it over; it is restored there, the copy is not published): %w", c.src.segPath(si.Area, si.Name), cause)
	ctx := context.WithoutCancel(c.a.ctx)
	if derr := c.dst.reader.Delete(ctx, sink.AreaStaging, staged); derr != nil && !errors.Is(derr, sink.ErrNotFound) {
		return errors.Join(err, fmt.Errorf("remove the staged copy in %s (a restore there removes it later): %w", c.dst, derr))
	}
	if data, version, rerr := c.dst.reader.ReadRecord(ctx, si.Name); rerr == nil {
		if r, ok := claims.Parse(data); ok && r.Staged == staged && !r.Held() {
			_ = c.dst.reader.DeleteRecord(ctx, si.Name, version)
		}
	}
	return err
}

// putRecord makes the record of a segment in DST hold data (a record as
// package claims writes it: its state and progress are what count), before
// the copy is published there, so that no restorer in DST ever sees the copy
// without the progress it needs. A record there with the same state and
// progress is kept. With sameThere (an identical copy is in DST already,
// maybe published by an earlier, interrupted mv) a record DST has is DST's
// own truth and is kept; only a missing one is written. A record held by a
// restorer in DST is never replaced.
func (c *copier) putRecord(si sink.Info, data []byte, sameThere bool) error {
	ctx := c.a.ctx
	dstPath := c.dst.segPath(si.Area, si.Name)
	want, ok := claims.Parse(data)
	if !ok {
		return fmt.Errorf("the claim record of %s is damaged; not moved (restore or release it there first)", c.src.segPath(si.Area, si.Name))
	}
	want.Token = "" // released in DST
	data, err := json.Marshal(&want)
	if err != nil {
		return err
	}
	cur, version, err := c.dst.reader.ReadRecord(ctx, si.Name)
	switch {
	case errors.Is(err, sink.ErrNotFound):
		if want.Progress == nil && want.State == claims.StateOpen {
			return nil // nothing to carry
		}
		version = ""
	case err != nil:
		return fmt.Errorf("read the claim record of %s: %w", dstPath, err)
	case sameThere:
		return nil
	default:
		r, ok := claims.Parse(cur)
		if ok && r.Held() {
			return fmt.Errorf("%s has a claim record held by %q; not replaced", dstPath, r.Owner)
		}
		if ok && r.State == want.State && sameJSON(r.Progress, want.Progress) {
			return nil // carried by an earlier, interrupted mv
		}
		if ok {
			want.Rev = r.Rev + 1
			if data, err = json.Marshal(&want); err != nil {
				return err
			}
		}
	}
	if _, err := c.dst.reader.WriteRecord(ctx, si.Name, data, version); err != nil {
		// The write may have taken effect and reported failure.
		if got, _, rerr := c.dst.reader.ReadRecord(ctx, si.Name); rerr == nil && bytes.Equal(got, data) {
			return nil
		}
		return fmt.Errorf("write the claim record of %s: %w", dstPath, err)
	}
	return nil
}

// sameJSON reports whether two JSON documents have the same bytes once
// compacted (nil and empty alike).
func sameJSON(x, y json.RawMessage) bool {
	var bx, by bytes.Buffer
	if len(x) > 0 && json.Compact(&bx, x) != nil || len(y) > 0 && json.Compact(&by, y) != nil {
		return false
	}
	return bytes.Equal(bx.Bytes(), by.Bytes())
}
