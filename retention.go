package dlqdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
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
// and counted by MetricsWriter.Expire. A ready segment is claimed before it
// is removed, so one being restored is never expired under its claim. Run
// Restorer.Prune with DryRun first to see what a limit would remove.
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
	MaxSegments int
	// MaxBytes expires the oldest segments while the area's segments take
	// more bytes.
	MaxBytes MemorySize
}

func (l Limits) set() bool { return l.MaxAge > 0 || l.MaxSegments > 0 || l.MaxBytes > 0 }

// Retention rules, as reported in ExpiredSegment.Rule and to
// MetricsWriter.Expire.
const (
	RuleMaxAge      = "max_age"
	RuleMaxSegments = "max_segments"
	RuleMaxBytes    = "max_bytes"
)

// PruneOptions tune Restorer.Prune.
type PruneOptions struct {
	// DryRun reports what would expire and changes nothing.
	DryRun bool
	// Now is the time ages are measured from. Default: time.Now().
	Now time.Time
}

// ExpiredSegment is a segment Prune removed (or, in a dry run, would
// remove).
type ExpiredSegment struct {
	Name  string
	Area  string // "ready", "quarantine" or "archive"
	Rule  string // RuleMaxAge, RuleMaxSegments or RuleMaxBytes
	Bytes int64
	// Records is the number of records removed: in a ready segment partly
	// restored, those neither delivered nor copied to a side segment.
	Records uint64
	// Oldest and Newest are the times of its first and last records.
	Oldest, Newest time.Time
}

// PruneReport says what Prune did.
type PruneReport struct {
	// Expired lists the segments removed, oldest first in each area.
	Expired []ExpiredSegment
	// Claimed counts the ready segments due to expire that a restorer
	// holds: they are left to it.
	Claimed int
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
		if !a.lim.set() {
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
		default:
			continue
		}
		ex, expired, err := r.expire(ctx, si, rule, lim, opts)
		if err != nil {
			if errors.Is(err, ErrClaimed) {
				rep.Claimed++
				continue
			}
			errs = append(errs, fmt.Errorf("segment %s: %w", si.Name, err))
			continue
		}
		if !expired {
			continue
		}
		rep.Expired = append(rep.Expired, ex)
		left--
		total -= si.Size
	}
	return errors.Join(errs...)
}

// expire removes one segment due to expire by rule, after reading what it
// holds; expired is false for a segment that turned out younger than MaxAge.
func (r *Restorer) expire(ctx context.Context, si sink.Info, rule string, lim Limits, opts PruneOptions) (ExpiredSegment, bool, error) {
	ex := ExpiredSegment{Name: si.Name, Area: si.Area.String(), Rule: rule, Bytes: si.Size}
	// A ready segment is claimed first: what it holds is read under the
	// claim, so a segment another pass restored meanwhile is not counted.
	var cl *claims.Claim
	progress := json.RawMessage(nil)
	if si.Area == sink.AreaReady {
		if opts.DryRun {
			rec, _, err := r.claimer.Inspect(ctx, si.Name)
			if err != nil {
				return ex, false, err
			}
			if rec != nil {
				progress = rec.Progress
			}
		} else {
			var err error
			if cl, err = r.claimer.Claim(ctx, si.Name); err != nil {
				return ex, false, err
			}
			progress = cl.Progress()
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
	if sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name}); err == nil && sr.Footer() != nil {
		ft := sr.Footer()
		ex.Records, ex.Oldest, ex.Newest = ft.Records, ft.MinTime, ft.MaxTime
	}
	_ = f.Close()
	if rule == RuleMaxAge && opts.Now.Sub(ex.Newest) <= lim.MaxAge {
		keep()
		return ex, false, nil
	}
	if p, err := claims.ParseProgress(progress); err == nil {
		// Gone with the segment: what was neither delivered nor
		// written to a side segment (records set aside and not yet
		// written are only here).
		var pending uint64
		for _, a := range p.Aside {
			pending += a.Records()
		}
		kept := p.Delivered + p.Quarantined + p.Skipped - min(pending, p.Quarantined+p.Skipped)
		ex.Records -= min(kept, ex.Records)
	}
	if opts.DryRun {
		return ex, true, nil
	}
	if cl != nil {
		err = cl.Finish(ctx, claims.Destination{Delete: true})
	} else {
		err = r.c.Reader.Delete(ctx, si.Area, si.Name)
		if errors.Is(err, sink.ErrNotFound) {
			return ex, false, nil // gone meanwhile
		}
	}
	if err != nil {
		if cl != nil {
			_ = cl.Release(context.WithoutCancel(ctx))
		}
		return ex, false, err
	}
	r.mw.Expire(ex.Area, rule, int(ex.Records))
	r.log.Warn("expired a segment", slog.String("segment", ex.Name), slog.String("area", ex.Area), slog.String("rule", rule),
		slog.Uint64("records", ex.Records), slog.Time("oldest", ex.Oldest), slog.Time("newest", ex.Newest), slog.Int64("bytes", ex.Bytes))
	return ex, true, nil
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
