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
	res, err = c.transfer(si, prepare, nil, res)
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
	if v.rec.Held() {
		notes = append(notes, fmt.Sprintf("a restorer (%s) holds its claim: the records it delivers are in the copy too", v.rec.Owner))
	}
	if v.started() && v.prog.Delivered > 0 {
		notes = append(notes, fmt.Sprintf("a restorer already delivered %d of its records; they are in the copy too (cp copies bytes; mv carries the restore progress)", v.prog.Delivered))
	}
	return notes
}

// moveReady moves a ready segment: it claims it, so that no restorer takes
// it meanwhile, writes its restore progress (if any) into DST's record,
// released, before the copy is published there, and finishes the claim by
// deleting the source once the copy is read back.
func (c *copier) moveReady(si sink.Info) (res copyResult, err error) {
	a, ctx := c.a, c.a.ctx
	srcPath, dstPath := c.src.segPath(si.Area, si.Name), c.dst.segPath(si.Area, si.Name)
	claimer, err := a.claimerOf(c.src)
	if err != nil {
		return res, err
	}
	cl, err := claimer.Claim(ctx, si.Name)
	if errors.Is(err, claims.ErrClaimed) {
		return res, errClaimedSeg
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
	progress := cl.Progress()
	v := &claimView{}
	v.prog, v.progErr = claims.ParseProgress(progress)
	started := v.progErr != nil || v.started()
	prepare := func(sameThere bool) error {
		rec := claims.Record{V: claims.Version, Owner: claimer.Owner(), Rev: 1, LeaseMS: a.lease.Milliseconds(),
			Written: time.Now().UTC(), Progress: progress}
		if !started {
			rec.Progress = nil
		}
		data, err := json.Marshal(&rec)
		if err != nil {
			return err
		}
		if sameThere && !started {
			return nil // DST's own record, if any, is DST's truth
		}
		return c.putRecord(si, data, sameThere)
	}
	res, err = c.transfer(si, prepare, keep.Hold, res)
	if errors.Is(err, sink.ErrNotFound) && c.gone(si) {
		// Moved or restored meanwhile by someone else: drop the claim.
		if ferr := cl.Forget(context.WithoutCancel(ctx)); ferr == nil {
			ended = true
		}
		return res, fmt.Errorf("%s is gone (moved or restored meanwhile): %w", srcPath, err)
	}
	if err != nil {
		return res, err
	}
	if started {
		what := "its restore progress (damaged: a restore there quarantines it, as it would here)"
		if v.progErr == nil {
			what = fmt.Sprintf("its restore progress (%s): a restore in %s resumes there", v.counts(0, false), c.dst)
		}
		res.notes = append(res.notes, "moved with "+what)
	}
	if err := keep.Hold(); err != nil {
		return res, c.lostWhileCopying(si, res, err)
	}
	keep.Stop()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := cl.Finish(fctx, claims.Destination{Delete: true}); err != nil {
		if errors.Is(err, claims.ErrLeaseLost) {
			ended = true
			return res, c.lostWhileCopying(si, res, err)
		}
		return res, fmt.Errorf("copied to %s, but deleting the source %s failed: %w", dstPath, srcPath, err)
	}
	ended = true
	return res, nil
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
// a restorer in SRC restores it now, so the copy published in DST (unless an
// identical one was there before) is removed again, through a claim there so
// that no restorer in DST is feeding it.
func (c *copier) lostWhileCopying(si sink.Info, res copyResult, cause error) error {
	err := fmt.Errorf("lost the claim on %s while moving it (a restorer took it over): %w", c.src.segPath(si.Area, si.Name), cause)
	if res.same {
		return err
	}
	ctx := context.WithoutCancel(c.a.ctx)
	dstPath := c.dst.segPath(si.Area, si.Name)
	claimer, cerr := c.a.claimerOf(c.dst)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	cl, cerr := claimer.Claim(ctx, si.Name)
	if cerr != nil {
		return errors.Join(err, fmt.Errorf("the copy %s is left: %w", dstPath, cerr))
	}
	if cerr := cl.Finish(ctx, claims.Destination{Delete: true}); cerr != nil {
		return errors.Join(err, fmt.Errorf("remove the copy %s: %w", dstPath, cerr))
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
