package dlqdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// Retention bounds how long and how much a store keeps, per area. Every
// limit is off by default: nothing expires unless a limit is set, and
// expiring a ready segment drops dead letters that were never restored, so
// set ready limits only when that is the policy. Archive limits are the usual
// ones: how long restored segments are kept for inspection.
//
// An expired segment is never removed silently: each is logged (warning) with
// its name, records, oldest and newest record and the rule that removed it,
// and counted by MetricsWriter.Expire, also when the removal took effect but
// reported failure (the segment is looked for after a failed removal). A
// ready segment is claimed before it is removed, so one being restored is
// never expired under its claim: it is left to its restorer, still counting
// toward MaxSegments and MaxBytes, and no newer segment is removed in its
// place. Run Restorer.Prune with DryRun first to see what a limit would
// remove: the dry run decides as the run does, claims included.
type Retention struct {
	// Ready, Quarantine and Archive are the limits of each area.
	Ready, Quarantine, Archive Limits
	// Interval is how often a started Restorer (Start) enforces the
	// limits. Default 1 minute.
	Interval time.Duration
}

// Limits bound one area. A zero field is no limit.
type Limits struct {
	// MaxAge expires a segment once its newest record is older than this.
	MaxAge time.Duration
	// MaxSegments expires the oldest segments while the area holds more.
	// The segments due are the oldest ones beyond the limit: one of them
	// being restored (claimed) is left alone, not replaced by a newer one.
	MaxSegments int
	// MaxBytes expires the oldest segments while the area's segments take
	// more bytes, the same way.
	MaxBytes MemorySize
}

func (l Limits) set() bool { return l.MaxAge > 0 || l.MaxSegments > 0 || l.MaxBytes > 0 }

// Retention rules, as reported in ExpiredSegment.Rule and to
// MetricsWriter.Expire.
const (
	RuleMaxAge      = "max_age"
	RuleMaxSegments = "max_segments"
	RuleMaxBytes    = "max_bytes"
	// RuleSelect: an area pruned by PruneOptions.Select alone.
	RuleSelect = "select"
)

// PruneOptions tune Restorer.Prune.
type PruneOptions struct {
	// DryRun reports what would expire and changes nothing.
	DryRun bool
	// Now is the time ages are measured from. Default: time.Now().
	Now time.Time
	// Select, when set, removes only the segments it selects whole: a
	// segment due by a limit is removed only if the selection selects
	// every record it holds (but those restored already), decided by its
	// footer when that is enough (time, area, segment) and otherwise by
	// reading its records; one holding a record it does not select is
	// left, counted in PruneReport.Unselected. Prune never removes a
	// record the selection does not select. Default nil: no narrowing.
	Select *selection.Selection
	// Areas, when set, are the areas pruned: each by its Limits, or, when
	// it has none, by Select alone (every segment Select selects whole is
	// removed, rule RuleSelect). Default: every area with limits.
	Areas []Area
}

// ExpiredSegment is a segment Prune removed (or, in a dry run, would
// remove).
type ExpiredSegment struct {
	Name  string
	Area  string // "ready", "quarantine" or "archive"
	Rule  string // RuleMaxAge, RuleMaxSegments or RuleMaxBytes
	Bytes int64
	// Records is the number of records removed that were never restored:
	// of a ready or quarantined segment, those its progress says were
	// neither delivered nor copied to a side segment; of an archived one,
	// all (they were restored, the archive kept a copy). Counted from the
	// footer, or from the intact blocks of a segment without one; zero for
	// a segment whose header is damaged.
	Records uint64
	// Oldest and Newest are the times of its first and last records.
	Oldest, Newest time.Time
}

// PruneReport says what Prune did.
type PruneReport struct {
	// Expired lists the segments removed, oldest first in each area.
	Expired []ExpiredSegment
	// Claimed counts the ready segments due to expire that a restorer
	// holds (or that cannot be claimed yet, such as a side segment whose
	// source is still being restored): they are left, and no other segment
	// goes in their place.
	Claimed int
	// Unselected counts the segments due that hold records
	// PruneOptions.Select does not select: they are left.
	Unselected int
}

// Prune enforces Config.Retention once: in each area with limits, it
// expires the segments older than MaxAge, then the oldest ones beyond
// MaxSegments and MaxBytes.
func (r *Restorer) Prune(ctx context.Context, opts PruneOptions) (PruneReport, error) {
	var rep PruneReport
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	var errs []error
	for _, a := range []struct {
		area sink.Area
		lim  Limits
	}{{sink.AreaReady, r.c.Retention.Ready}, {sink.AreaQuarantine, r.c.Retention.Quarantine}, {sink.AreaArchive, r.c.Retention.Archive}} {
		switch {
		case opts.Areas != nil && !slices.Contains(opts.Areas, a.area):
			continue
		case !a.lim.set() && (opts.Areas == nil || opts.Select == nil):
			continue
		}
		if err := r.pruneArea(ctx, a.area, a.lim, opts, &rep); err != nil {
			errs = append(errs, fmt.Errorf("dlqdump: prune %s: %w", a.area, err))
		}
	}
	return rep, errors.Join(errs...)
}

func (r *Restorer) pruneArea(ctx context.Context, area sink.Area, lim Limits, opts PruneOptions, rep *PruneReport) error {
	var infos []sink.Info
	var total int64
	for si, err := range r.c.Reader.List(ctx, area) {
		if err != nil {
			return err
		}
		infos = append(infos, si)
		total += si.Size
	}
	left := len(infos)
	var errs []error
	for _, si := range infos { // oldest first
		rule := ""
		switch {
		case lim.MaxSegments > 0 && left > lim.MaxSegments:
			rule = RuleMaxSegments
		case lim.MaxBytes > 0 && total > int64(lim.MaxBytes):
			rule = RuleMaxBytes
		case lim.MaxAge > 0:
			// Names carry the oldest record's time: only segments at
			// least that old may hold no newer record.
			if t, ok := segment.ParseFileName(si.Name); ok && opts.Now.Sub(t) <= lim.MaxAge {
				continue
			}
			rule = RuleMaxAge
		case !lim.set():
			rule = RuleSelect
		default:
			continue
		}
		// A segment due by the count or the size counts as gone from
		// here on, whether it expires, is left to the restorer holding
		// it or fails to expire: a newer segment never goes in its place,
		// and a dry run, which claims nothing, decides the same.
		if rule != RuleMaxAge {
			left--
			total -= si.Size
		}
		ex, expired, err := r.expire(ctx, si, rule, lim, opts)
		switch {
		case errors.Is(err, ErrClaimed):
			rep.Claimed++
		case errors.Is(err, errNoneSelected) && rule == RuleSelect:
		case errors.Is(err, errUnselected):
			rep.Unselected++
		case err != nil:
			errs = append(errs, fmt.Errorf("segment %s: %w", si.Name, err))
		case expired:
			rep.Expired = append(rep.Expired, ex)
			if rule == RuleMaxAge {
				left--
				total -= si.Size
			}
		}
	}
	return errors.Join(errs...)
}

// expire removes one segment due to expire by rule, after reading what it
// holds; expired is false for a segment that turned out younger than MaxAge
// or gone. A dry run decides as the run does (Claimer.Check for Claim) and
// removes nothing.
func (r *Restorer) expire(ctx context.Context, si sink.Info, rule string, lim Limits, opts PruneOptions) (ExpiredSegment, bool, error) {
	ex := ExpiredSegment{Name: si.Name, Area: si.Area.String(), Rule: rule, Bytes: si.Size}
	// A ready segment is claimed first: what it holds is read under the
	// claim, so a segment another pass restored meanwhile is not counted.
	// A quarantined one is read with its record, which keeps the progress
	// made before it was quarantined.
	var cl *claims.Claim
	var progress json.RawMessage
	switch {
	case si.Area == sink.AreaReady && opts.DryRun:
		p, _, err := r.claimer.Check(ctx, si.Name)
		var fin *claims.Finished
		if errors.As(err, &fin) {
			// The claim would complete what its holder decided.
			if a := parseAccount(fin.To); a.Expired != nil {
				return *a.Expired, true, nil
			}
			return ex, false, nil
		}
		if err != nil {
			return ex, false, err
		}
		progress = p
	case si.Area == sink.AreaReady:
		var err error
		cl, err = r.claimer.Claim(ctx, si.Name)
		var fin *claims.Finished
		if errors.As(err, &fin) {
			// Its holder (another prune, or a restorer) decided how to
			// finish it and stopped before it was done: completed now.
			if a := r.completed(fin, nil); a.Expired != nil {
				return *a.Expired, true, nil
			}
			return ex, false, nil
		}
		if err != nil {
			return ex, false, err
		}
		progress = cl.Progress()
	case si.Area == sink.AreaQuarantine:
		rec, _, err := r.claimer.Inspect(ctx, si.Name)
		if err != nil {
			return ex, false, err
		}
		if rec != nil {
			progress = rec.Progress
		}
	}
	keep := func() { // not expired after all
		switch {
		case cl == nil:
		case progress == nil && !cl.WasQuarantined():
			_ = cl.Forget(context.WithoutCancel(ctx)) // the record only this claim made
		default:
			_ = cl.Release(context.WithoutCancel(ctx))
		}
	}
	if t, ok := segment.ParseFileName(si.Name); ok {
		ex.Oldest, ex.Newest = t, t
	}
	f, err := r.c.Reader.Open(ctx, si.Area, si.Name)
	if errors.Is(err, sink.ErrNotFound) {
		if cl != nil {
			_ = cl.Forget(context.WithoutCancel(ctx)) // restored meanwhile
		}
		return ex, false, nil
	}
	if err != nil {
		keep()
		return ex, false, err
	}
	err = count(f, &ex, r.c.maxBlock)
	if err == nil && rule == RuleMaxAge && opts.Now.Sub(ex.Newest) <= lim.MaxAge {
		_ = f.Close()
		keep()
		return ex, false, nil
	}
	if err == nil && !opts.Select.IsAll() {
		err = r.selectedWhole(ctx, f, si, progress, opts.Select)
	}
	_ = f.Close()
	if err != nil {
		keep()
		return ex, false, err
	}
	ex.Records -= min(handled(progress), ex.Records)
	if opts.DryRun {
		return ex, true, nil
	}
	// The expiry goes with the decision into the claim record: a prune
	// that stalls before the delete and is taken over is completed, and
	// counted, by its taker.
	if err := r.remove(ctx, cl, si, withAccount(claims.Destination{Delete: true}, finishAccount{Expired: &ex})); err != nil {
		switch {
		case errors.Is(err, ErrLeaseLost):
			r.log.Info("taken over while expiring a segment (this process stalled past its lease): its new holder completes the expiry and counts it",
				slog.String("segment", ex.Name), slog.Any("error", err))
			return ex, false, fmt.Errorf("%w: %w", ErrClaimed, err)
		case errors.Is(err, sink.ErrNotFound):
			return ex, false, nil // removed by someone else meanwhile
		}
		return ex, false, err
	}
	r.countExpired(ex)
	return ex, true, nil
}

// count reads what a segment holds into ex: from its footer or, for a
// segment without one, from its intact blocks; nothing for a segment whose
// header is damaged. Failing to read it (not damage) is an error: a segment
// is never expired uncounted.
func count(f sink.File, ex *ExpiredSegment, maxBlock int) error {
	opts := &segment.ReaderOptions{Name: ex.Name, MaxBlockSize: maxBlock}
	sr, err := segment.NewReader(f, f.Size(), opts)
	var ce *segment.CorruptError
	switch {
	case errors.As(err, &ce):
		return nil
	case err != nil:
		return fmt.Errorf("dlqdump: read segment %s: %w", ex.Name, err)
	case sr.Footer() != nil:
		ft := sr.Footer()
		ex.Records, ex.Oldest, ex.Newest = ft.Records, ft.MinTime, ft.MaxTime
		return nil
	}
	res, err := segment.Scan(f, f.Size(), opts)
	switch {
	case errors.As(err, &ce):
		return nil
	case err != nil:
		return fmt.Errorf("dlqdump: read segment %s: %w", ex.Name, err)
	}
	ex.Records = res.Records
	return nil
}

// handled returns how many records of a segment its progress says were
// delivered or written to a side segment: those are not lost with it
// (records set aside and not yet written are only in the segment).
func handled(progress json.RawMessage) uint64 {
	p, err := claims.ParseProgress(progress)
	if err != nil {
		return 0
	}
	var pending uint64
	for _, a := range p.Aside {
		pending += a.Records()
	}
	return p.Delivered + p.Quarantined + p.Skipped - min(pending, p.Quarantined+p.Skipped)
}

// remove removes a segment that expires, under its claim cl for a ready one.
// It succeeds when the segment is gone, which a removal that failed may have
// done all the same (its answer lost, or cut short): after a failure the
// segment is looked for, and one found gone counts as removed, so that an
// expiry that took effect is never left uncounted. The removal is not cut
// short by ctx (a Restorer closing) but bounded by stopDeadline of its own.
// ErrNotFound means someone else removed it first.
//
// A segment two prunes expire at once (replicas with the same Retention) is
// counted by the one whose removal took it; if that removal's answer was
// lost while the other's failed without effect, both count it. A ready
// segment is counted once, by the holder of its claim.
func (r *Restorer) remove(ctx context.Context, cl *claims.Claim, si sink.Info, to claims.Destination) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopDeadline)
	defer cancel()
	var err error
	if cl != nil {
		err = cl.Finish(ctx, to)
	} else if err = r.c.Reader.Delete(ctx, si.Area, si.Name); errors.Is(err, sink.ErrNotFound) {
		return err
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrLeaseLost) {
		return err // taken over: the segment is the new holder's
	}
	gone, gerr := r.gone(ctx, si)
	switch {
	case gerr != nil || !gone:
		if cl != nil {
			_ = cl.Release(ctx)
		}
		return errors.Join(err, gerr)
	case cl != nil:
		// Gone: the rest of Finish (removing the record) is tried
		// again; a record left is swept once the claim expires.
		if ferr := cl.Finish(ctx, to); ferr != nil {
			r.log.Warn("removing the record of an expired segment failed; it is swept later", slog.String("segment", si.Name), slog.Any("error", ferr))
		}
	}
	return nil
}

// gone reports whether a segment is no longer in its area, looking again
// after a failed look (up to three times).
func (r *Restorer) gone(ctx context.Context, si sink.Info) (bool, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var f sink.File
		f, err = r.c.Reader.Open(ctx, si.Area, si.Name)
		switch {
		case errors.Is(err, sink.ErrNotFound):
			return true, nil
		case err == nil:
			_ = f.Close()
			return false, nil
		}
		if serr := backoff.Sleep(ctx, backoff.FullJitter(10*time.Millisecond, time.Second, attempt)); serr != nil {
			break
		}
	}
	return false, fmt.Errorf("dlqdump: look for expired segment %s: %w", si.Name, err)
}

// pruneLoop enforces the retention every Retention.Interval until ctx ends.
func (r *Restorer) pruneLoop(ctx context.Context) {
	defer r.bgWG.Done()
	t := time.NewTicker(r.c.Retention.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if _, err := r.Prune(ctx, PruneOptions{}); err != nil && ctx.Err() == nil {
			r.setErr(err)
			r.log.Warn("enforcing the retention failed", slog.Any("error", err))
		}
	}
}
