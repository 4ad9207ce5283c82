package dlqdump

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqdump/dlqdump/internal/claims"
)

// Restorer brings dumped items back (seed: Restorer). It lists the ready
// segments of Config.Reader oldest first, claims each (a lease, so several
// restorers, in one process or many, never feed the same segment at once),
// checks its Version, decodes every record with Config.Decoder and enqueues
// it into Config.Queue, no faster than Config.RateLimit and only while the
// destination's Rate is at most Config.AllowRate. It checkpoints after every
// block, so a restorer that dies is resumed where its last checkpoint says,
// and deletes (or archives) a segment only when every record in it was
// delivered or set aside.
//
// Records that cannot be restored are never dropped: a record that does not
// decode, that the destination refuses Config.MaxAttempts times, or that was
// replayed Config.MaxReplays times is set aside and written to a quarantine
// segment with the reason; a segment of another Version, or one whose
// progress cannot be trusted, is moved to quarantine whole; a segment with
// damaged blocks has its intact records restored and is then moved to
// quarantine with what was done to it, so that releasing it never feeds a
// delivered record again.
//
// After a crash, the records of at most one block of each segment in flight
// (Config.SegmentsInFlight: the block being delivered or checkpointed) may be
// delivered again; see Config.CheckpointInterval.
type Restorer struct {
	c       *restorerConfig
	mw      MetricsWriter
	log     *slog.Logger
	claimer *claims.Claimer
	limiter *rate.Limiter // nil without RateLimit

	run        chan struct{} // a token: one pass at a time
	delivering chan struct{} // a token: one segment's run delivers a block at a time
	recovered  bool          // the Reader recovered (owned by the pass holding run)
	stopping   atomic.Bool   // Close: stop at the next block
	closing    context.Context
	close      context.CancelFunc // Close: stop waiting, at the next record
	mu         sync.Mutex
	closed     bool
	skip       map[string]leftInPlace // segments left in place (VersionKeep, no key)
	bgCancel   context.CancelFunc
	bgWG       sync.WaitGroup

	restored, retried, quarantined, bytes atomic.Uint64
	status                                atomic.Pointer[storeStatus]
	plans                                 planCache    // what selective passes planned segments with (restore_plancache.go)
	shared                                *sharedPlans // what they planned unencrypted segments with, shared by the Restorers over the Reader; nil: none
	kept                                  keptSegments // small segments a dry run read, for the next Run (restore_kept.go)
	lastErr                               atomic.Pointer[error]
}

// passNames returns the ready segments a pass goes through, oldest first.
// A pass over named segments (RunOptions.Segments: a restore job's over a
// few, say) takes them as named, and what is not there is skipped: its
// cost is theirs, not the store's. Any other pass lists the store,
// refreshing the status (Stats, the MetricsWriter's Source) and sweeping
// what finished restorers left, before and after.
func (r *Restorer) passNames(ctx context.Context, opts *RunOptions) ([]string, error) {
	if len(opts.Segments) > 0 {
		names := slices.Clone(opts.Segments)
		slices.Sort(names)
		return slices.Compact(names), nil
	}
	staging := r.sweepStaging(ctx, opts.DryRun)
	st, err := r.refresh(ctx)
	if err != nil {
		staging.Wait()
		return nil, err
	}
	if st.missing != nil {
		staging.Wait()
		return nil, fmt.Errorf("dlqdump: restore: nothing to restore: %w", st.missing)
	}
	if !opts.DryRun {
		r.sweep(ctx, st.orphans)
	}
	staging.Wait()
	opts.after = func() {
		if ctx.Err() != nil {
			return // the status loop refreshes; a cancelled pass returns now
		}
		staging := r.sweepStaging(ctx, opts.DryRun)
		defer staging.Wait()
		st, err := r.refresh(ctx)
		if err != nil {
			r.log.Debug("refreshing the store's status after a pass failed", slog.Any("error", err))
			return
		}
		if !opts.DryRun {
			r.sweep(ctx, st.orphans) // the side segments' records of segments just finished
		}
	}
	return st.readyNames, nil
}

// sweepStaging removes, in the background, what was staged for a claim that
// ended before publishing it (unless dry): it does not depend on the
// store's listings, so its own listing's round trip overlaps theirs
// instead of following them at every pass's start and end. The caller
// waits for it before the pass's runs start (or before it returns).
func (r *Restorer) sweepStaging(ctx context.Context, dry bool) *sync.WaitGroup {
	var wg sync.WaitGroup
	if !dry {
		wg.Go(func() {
			if _, err := r.claimer.SweepStaging(ctx); err != nil {
				r.log.Debug("removing staged segments that will not be published failed", slog.Any("error", err))
			}
		})
	}
	return &wg
}

// ProgressEvery is how often, at most, RunOptions.OnProgress is called
// between checkpoints.
const ProgressEvery = 100 * time.Millisecond

// blockStop is an error OnBlock or OnProgress returned, or the cause of a
// RunOptions.Stop: it stops the whole pass.
type blockStop struct{ err error }

func (e *blockStop) Error() string { return e.err.Error() }
func (e *blockStop) Unwrap() error { return e.err }

// errStop ends a pass early without error: limit reached, window closed or
// Close.
var errStop = errors.New("dlqdump: pass stopped")

// NewRestorer validates the config and returns a Restorer. It does nothing
// until Restore, Run or Start is called (or a jobs.Runner runs a job with it); the first pass that may
// change the store (not a dry run) first lets a Reader that implements
// sink.Recoverer recover what crashed writers left.
func NewRestorer(config *Config) (*Restorer, error) {
	c, err := config.restorerConfig()
	if err != nil {
		return nil, err
	}
	r := &Restorer{
		c:          c,
		mw:         c.MetricsWriter,
		log:        c.Logger.With(slog.String("component", "dlqdump.Restorer"), slog.String("owner", c.Owner)),
		run:        make(chan struct{}, 1),
		delivering: make(chan struct{}, 1),
		skip:       map[string]leftInPlace{},
	}
	r.claimer, err = claims.NewClaimer(c.Reader, c.Owner, c.Lease, &claims.Options{Logger: r.log})
	if err != nil {
		return nil, err
	}
	if c.RateLimit > 0 {
		r.limiter = rate.NewLimiter(rate.Limit(c.RateLimit), max(1, int(c.RateLimit/100)))
	}
	r.status.Store(&storeStatus{})
	r.closing, r.close = context.WithCancel(context.Background())
	r.shared = joinPlans(c.Reader, c.Encryption != nil && c.Encryption.RequireEncrypted)
	return r, nil
}

// Restore makes one pass: restores every segment ready now and returns.
func (r *Restorer) Restore(ctx context.Context) error {
	_, err := r.Run(ctx, RunOptions{})
	return err
}

// Run makes one pass with options and reports what it did. Segments claimed
// by other restorers are left to them. Errors with one segment do not stop the
// pass; they are joined into the returned error. Encrypted segments no
// identity unwraps are left in place, counted in Report.NoKeySegments and
// named in an error wrapping ErrNoKey, so that "nothing to restore" is never
// mistaken for "nothing this Restorer can decrypt". A Reader whose location
// does not exist (an fs.Reader's Directory, see sink.Locator) is an error
// wrapping ErrNotFound that names it. A pass stopped by ctx
// records where it stopped (with a short deadline of its own) and returns
// ctx's error.
func (r *Restorer) Run(ctx context.Context, opts RunOptions) (Report, error) {
	rep := Report{ByReason: map[string]uint64{}}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return rep, ErrClosed
	}
	if err := opts.resolve(r.c); err != nil {
		return rep, err
	}
	select {
	case r.run <- struct{}{}:
		defer func() { <-r.run }()
	case <-ctx.Done():
		return rep, ctx.Err()
	}
	if opts.DryRun && opts.KeepForPass {
		r.kept.clear() // what an earlier dry run kept goes: this one keeps its own
	} else {
		defer r.kept.clear() // what a dry run kept is for this Run (restore_kept.go)
	}
	if !opts.DryRun && !r.recovered {
		if err := recoverSink(ctx, r.c.Reader, r.log, r.mw); err != nil {
			r.setErr(err)
			return rep, err
		}
		r.recovered = true
	}
	names, err := r.passNames(ctx, &opts)
	if err != nil {
		r.setErr(err)
		return rep, err
	}
	if opts.after != nil {
		defer opts.after()
	}
	if opts.Area == AreaQuarantine {
		if names, err = r.quarantineNames(ctx, &opts); err != nil {
			r.setErr(err)
			return rep, err
		}
	}
	names = r.planNames(ctx, &opts, names, &rep)
	var errs []error
	var noKey []string
	// result is the pass's error: errs, and the segments left for want of
	// a key.
	result := func() error {
		if len(noKey) == 0 {
			return errors.Join(errs...)
		}
		nk := &noKeyError{names: noKey}
		if !opts.DryRun {
			r.setErr(nk)
		}
		if len(errs) == 0 {
			return nk
		}
		return errors.Join(append(errs, nk)...)
	}
	var held []string // segments other restorers held, with WaitClaimed
	// settle accounts for err, how the run of segment si ended: stop
	// says that the pass ends there, returning perr.
	settle := func(si string, err error) (stop bool, perr error) {
		if err != nil && r.closing.Err() != nil && ctx.Err() == nil {
			return true, errors.Join(append(errs, ErrClosed)...)
		}
		var bs *blockStop
		switch {
		case err == nil:
		case errors.As(err, &bs):
			errs = append(errs, bs.err)
			return true, result()
		case errors.Is(err, errStop):
			return true, result()
		case errors.Is(err, ErrUnavailable):
			// The destination is down: the other segments would only
			// be tried in vain (the pipeline stopped those in flight).
			// Each resumes where it stopped; the caller (passLoop:
			// the log) says why.
			r.setErr(err)
			errs = append(errs, err)
			return true, result()
		case errors.Is(err, ErrLeaseLost):
			// This process stalled past its lease, or lost the store:
			// the other segments in flight, claimed as long ago, were
			// stopped at their next record (the pipeline); a later
			// pass lists the store again.
			r.setErr(err)
			errs = append(errs, err)
			return true, result()
		case errors.Is(err, ErrClaimed) && opts.WaitClaimed > 0 && !slices.Contains(held, si):
			r.log.Debug("a segment the pass selects from is held by another restorer; the pass comes back to it at its end",
				slog.String("segment", si), slog.Any("error", err))
			held = append(held, si)
		case errors.Is(err, ErrClaimed):
			rep.Claimed++ // another restorer has it
		case errors.Is(err, ErrNotFound):
			// Another restorer finished it.
		case errors.Is(err, ErrNoKey):
			rep.NoKeySegments++ // left in place, logged by openFailed
			noKey = append(noKey, si)
		case ctx.Err() != nil:
			return true, ctx.Err()
		default:
			r.setErr(err)
			r.log.Warn("restoring a segment failed", slog.String("segment", si), slog.Any("error", err))
			if len(errs) < 8 {
				errs = append(errs, err)
			}
		}
		return false, nil
	}
	pl := r.newPipeline(ctx, &opts, names)
	defer pl.stop(nil) // Run's returns stop it first, with pl.end
	for k := range names {
		i := pl.at(k) // the pass's order: the listing's, or its parts shuffled
		si := names[i]
		if ctx.Err() != nil {
			return pl.end(&rep), ctx.Err()
		}
		if !opts.wants(si) || opts.Limit > 0 && rep.Delivered+rep.Quarantined >= opts.Limit {
			continue
		}
		if opts.Stop != nil && opts.Stop.Err() != nil {
			return pl.end(&rep), errors.Join(append(errs, context.Cause(opts.Stop))...)
		}
		if opts.Area == AreaQuarantine {
			if opts.OnRelease != nil && !opts.DryRun {
				if err := opts.OnRelease(si); err != nil {
					return pl.end(&rep), errors.Join(append(errs, err)...)
				}
			}
			if err := r.release(ctx, si, &opts); err != nil {
				if errors.Is(err, ErrClaimed) {
					rep.Claimed++ // settling in quarantine: a later pass releases it
				} else {
					errs = append(errs, err)
				}
				continue
			}
		}
		r.mu.Lock()
		sk, skipped := r.skip[si]
		r.mu.Unlock()
		if skipped {
			if sk.noKey {
				rep.NoKeySegments++
				noKey = append(noKey, si)
			}
			continue
		}
		if stop, err := settle(si, pl.restore(i, &rep)); stop {
			return pl.end(&rep), err
		}
	}
	pl.end(&rep)
	if len(held) > 0 {
		if stop, err := r.restoreHeld(ctx, &opts, held, &rep, settle); stop {
			return rep, err
		}
	}
	return rep, result()
}

// sweep removes the records of segments that are neither ready nor
// quarantined, left by restorers that could not finish removing them (most
// are those of segments other restorers are finishing, still held: one
// read each, SegmentsInFlight at once). What was staged for a claim that
// ended before publishing it is swept beside the listings (sweepStaging).
func (r *Restorer) sweep(ctx context.Context, names []string) {
	r.each(names, func(name string) {
		removed, err := r.claimer.Sweep(ctx, name)
		switch {
		case err != nil:
			r.log.Debug("removing a stale claim record failed", slog.String("segment", name), slog.Any("error", err))
		case removed != nil:
			r.swept(name, removed)
		}
	})
}

// swept accounts for the record Sweep removed of a segment that is gone.
func (r *Restorer) swept(name string, rec *claims.Record) {
	p, perr := claims.ParseProgress(rec.Progress)
	switch {
	case rec.State == claims.StateFinishing:
		// Its holder finished it and stopped before removing the
		// record: what the finish accounts for is counted here, once.
		r.log.Info("removed the claim record of a segment that is gone", slog.String("segment", name))
		var to claims.Destination
		if rec.To != nil {
			to = *rec.To
		}
		if perr != nil {
			r.account(to, nil)
		} else {
			r.account(to, &p)
		}
	case rec.State == claims.StateOpen && perr == nil && p.Started() && !(p.Done && len(p.Aside) == 0 && len(p.Carve) == 0):
		// A restore under way (or released midway) whose segment is in
		// neither the ready area nor quarantine: removed by someone
		// without its claim.
		r.mw.Fail("gone")
		r.log.Warn("a segment being restored is in neither the ready area nor quarantine: removed by someone without its claim; the records its progress does not count as delivered or set aside are gone",
			slog.String("segment", name), slog.String("holder", rec.Owner), slog.Uint64("delivered", p.Delivered), slog.Uint64("set_aside", p.Quarantined+p.Skipped))
	default:
		r.log.Info("removed the claim record of a segment that is gone", slog.String("segment", name))
	}
}

// countQuarantined counts, by label, the records a finished segment set
// aside for quarantine.
func (r *Restorer) countQuarantined(labels map[string]uint64) {
	for label, n := range labels {
		r.mw.Quarantine(label, int(n))
		r.quarantined.Add(n)
	}
}

func (r *Restorer) setErr(err error) {
	r.lastErr.Store(&err)
}

// Start runs passes in the background every CheckInterval, within
// Config.Windows, until Close, keeps Stats and the store's gauges current
// every CheckInterval, also while a pass waits for the destination, and
// enforces Config.Retention every Retention.Interval when it sets limits.
func (r *Restorer) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.bgCancel != nil {
		return fmt.Errorf("dlqdump: Restorer already started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.bgCancel = cancel
	r.bgWG.Add(2)
	go r.passLoop(ctx)
	go r.statusLoop(ctx)
	if r.c.Retention.Ready.set() || r.c.Retention.Quarantine.set() || r.c.Retention.Archive.set() {
		r.bgWG.Add(1)
		go r.pruneLoop(ctx)
	}
	return nil
}

// passLoop runs the background passes.
func (r *Restorer) passLoop(ctx context.Context) {
	defer r.bgWG.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	missingLogged := false // the store's missing location was logged
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		now := time.Now()
		opts := RunOptions{}
		if len(r.c.Windows) > 0 {
			open, closes := windowAt(r.c.Windows, now)
			if open.After(now) {
				r.log.Debug("outside the restore windows", slog.Time("next", open))
				t.Reset(open.Sub(now))
				continue
			}
			opts.stopAt = closes
		}
		rep, err := r.Run(ctx, opts)
		var nk *noKeyError
		switch missing := r.status.Load().missing != nil; {
		case err == nil || ctx.Err() != nil || r.stopping.Load() && errors.Is(err, ErrClosed):
			missingLogged = false
		case errors.As(err, &nk) && err == error(nk):
			// Only segments left for want of a key: each was logged when
			// first met, and Stats().LastError says it.
			r.log.Debug("restore pass left encrypted segments in place", slog.Any("error", err))
		case missing && !missingLogged:
			// Legitimate before the first dump: said once, shown in Stats.
			r.log.Warn("the store does not exist (yet): passes go on, and restore once a Queue has written there", slog.Any("error", err))
			missingLogged = true
		case !missing:
			r.log.Warn("restore pass failed", slog.Any("error", err))
		}
		if rep.Delivered > 0 || rep.Quarantined > 0 {
			r.log.Info("restore pass", slog.Uint64("delivered", rep.Delivered), slog.Uint64("quarantined", rep.Quarantined), slog.Int("segments", rep.Segments))
		}
		if r.stopping.Load() {
			return
		}
		t.Reset(r.c.CheckInterval)
	}
}

// Close stops background passes and the pass in progress, which records
// where it stopped (at the record it was about to deliver) and releases its
// claim; it waits for that for at most twice the lease. A second call returns
// ErrClosed.
func (r *Restorer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.c.Lease)
	defer cancel()
	return r.Shutdown(ctx)
}

// Shutdown is Close bounded by ctx.
func (r *Restorer) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.stopping.Store(true)
	cancel := r.bgCancel
	r.mu.Unlock()
	leavePlans(r.shared) // its passes still running keep using it
	r.close()
	// Wait for a pass in progress (background or not) to stop.
	select {
	case r.run <- struct{}{}:
		<-r.run
	case <-ctx.Done():
		// A destination that never returns keeps its pass: it ends when
		// the destination does, and records where it stopped then.
		if cancel != nil {
			cancel()
		}
		return ctx.Err()
	}
	r.kept.clear() // what a dry run kept for a pass that will not come
	if cancel != nil {
		cancel()
		done := make(chan struct{})
		go func() { r.bgWG.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// versionOK reports whether segments of version v are restored.
func (r *Restorer) versionOK(v Version) bool {
	return v == r.c.Version || r.c.VersionCompatible != nil && r.c.VersionCompatible(v, r.c.Version)
}
