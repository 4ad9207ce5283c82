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

	"github.com/koykov/queue"
	"golang.org/x/time/rate"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/selection"
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
	plans                                 planCache // what selective passes planned segments with (restore_plancache.go)
	lastErr                               atomic.Pointer[error]
}

// RunOptions select what a pass restores. The zero value restores
// everything.
type RunOptions struct {
	// Since and Until restore only records that entered the dump in
	// [Since, Until); zero means unbounded.
	Since, Until time.Time
	// Where restores only records having all these header values.
	Where Headers
	// Select restores only the records it selects (package selection,
	// docs/SELECT.md), on top of Since, Until and Where: a record must
	// pass them all. A selective pass (any of the four) does not claim
	// nor read a segment whose header, footer and summary rule out every
	// record (counted in Report.SkippedSegments); a selection naming
	// segments ("segment = ...") is a pass over those, like Segments.
	// Its areas ("area = ...") are the pass's Area: a ready pass selects
	// no record of "area = quarantine". Default nil: every record.
	Select *selection.Selection
	// Limit stops the pass once this many records were delivered or
	// quarantined (refused, undecodable, replayed too often, or in a
	// segment quarantined whole): at most Limit records are offered to the
	// destination, refused or not. The segment in progress is released at
	// the next record and resumed there by the next pass. Records the
	// filters leave are not counted. 0: no limit.
	Limit uint64
	// DryRun counts what a pass would do, by reason, starting where each
	// segment's progress says, and changes nothing: no claim, no delivery,
	// no side segment, no checkpoint.
	DryRun bool
	// Segments restricts the pass to these segment names.
	Segments []string
	// Area is where the pass takes segments from: AreaReady, or
	// AreaQuarantine to release quarantined segments (those Segments
	// names, or all) into the ready area one at a time and restore them,
	// as dlqdump quarantine release and a restore would. Default
	// AreaReady.
	Area Area
	// Rate, when positive, paces this pass alone to Rate items per
	// second, on top of Config.RateLimit. Default 0: no pace of its own.
	Rate float64
	// Destination names where the pass delivers: "" is Config.Queue,
	// another name one of Config.Destinations. Default "".
	Destination string
	// Discard, when not "", sets every record the pass selects aside
	// into the quarantine instead of delivering it, its quarantine header
	// saying "discarded: " and Discard (say who decided and why, e.g.
	// "by alice@ops-1: duplicate of ord-7"): a person's decision that the
	// records are not to be replayed, never a silent delete. They are
	// written to a quarantine side segment under the segment's claim, as
	// refused records are, stay restorable (dlqdump quarantine release)
	// until the quarantine's retention removes them, and are counted by
	// MetricsWriter.Quarantine with the reason "discarded" (DiscardLabel)
	// once their segment is finished, as every record set aside is:
	// exactly once, whoever finishes it (Report.Quarantined counts them
	// at once). Nothing is
	// offered to the destination and nothing is decoded. A discard pass
	// over a selection of record IDs ("id in (...)") reads only their
	// blocks. Default "": deliver.
	Discard string
	// OnBlock, when set, is called after the checkpoint of every block
	// the pass handles, with what the pass did so far. An error stops
	// the pass there, at a block boundary (the segment is released where
	// it stopped), and Run returns it. A restore job records its
	// progress, and learns that it is paused or cancelled, this way.
	OnBlock func(Report) error
	// Stop, when set, stops the pass at the next record once it is done:
	// no record is offered to the destination after that, the waits for
	// the destination's pace (Rate, Config.RateLimit, AllowRate, and,
	// with Concurrency 1, a refused record's back-off) are cut short, the
	// deliveries in flight end as they would (an Enqueue in progress is
	// never interrupted, and is counted), the segment's progress is saved
	// at the first record not delivered, and Run returns
	// context.Cause(Stop). So a stop takes effect within a record at any
	// pace and delivers nothing twice. A restore job is paused, cancelled
	// or handed over this way. Default nil.
	Stop context.Context
	// OnProgress, when set, is called from the pass's goroutine with what
	// the pass did so far: after a record once ProgressEvery passed since
	// the last call (checkpoint false: an error stops the pass at the next
	// record), and before each checkpoint of a segment's progress is
	// handed to the store (checkpoint true: an error keeps that checkpoint
	// from the store and stops the pass). Run returns the error. The
	// Report's ByReason is the pass's own: read it within the call only.
	// A restore job writes its counts there, before the segments'
	// checkpoints, so that its record never says less than they do.
	// Default nil.
	OnProgress func(rep Report, checkpoint bool) error
	// OnRelease, when set, is called with a quarantined segment's name
	// before a pass over the quarantine releases it into the ready area;
	// an error stops the pass before it, and Run returns it. A restore job
	// over the quarantine notes there the segments it released, so that
	// whoever takes it over finishes them. Default nil.
	OnRelease func(name string) error
	// WaitClaimed, when positive, is how long the pass waits for a
	// segment it selects from that another restorer holds (another
	// selective pass over the same segment, a restore job's): such a
	// segment is put off to the end of the pass, and then watched (its
	// claim record read with a back-off) until its holder lets it go,
	// and restored, one at a time, within this long of when the wait
	// began; one still held then is left to its holder (Report.Claimed).
	// Pause and cancel (Stop) end the wait at once. Restore jobs wait so
	// that jobs over one store do not end their passes on each other's
	// segments (jobs.RunnerOptions.WaitHeld). Default 0: a held segment
	// is left to its holder at once.
	WaitClaimed time.Duration
	// Transform, when set, changes every record the pass delivers on its
	// way to the destination (see Transform: a Go function, or a jq
	// program of package transform); a record it refuses is quarantined
	// with its error, the stored original unchanged. A dry run runs it
	// too, counting the records it would refuse ("quarantine: transform"
	// in Report.ByReason). Default nil: records are delivered as stored.
	Transform Transform
	// TransformWorkers, above 1, runs the Transform on that many
	// goroutines per segment in flight, on the records of the next block
	// while those of the block before are delivered: for a Transform that
	// costs more than a delivery (a jq program: package transform's JQ
	// is safe for it). The deliveries keep their order, one at a time (or
	// Config.Concurrency), and a crash still delivers at most a block
	// twice; the results wait for their record, at most twice a block's
	// memory of them per block, and the next block is held meanwhile
	// (docs/MEMORY.md). Set it only for a Transform that is safe
	// for concurrent use and changes nothing but its record: it is called
	// out of record order, and on records the pass may not deliver (it
	// stopped in the block). A dry run transforms one record at a time.
	// Default 0 (and 1): one record at a time, in order, when it is
	// delivered.
	TransformWorkers int
	// Sample is how many records a dry run with a Transform keeps in
	// Report.Changes, before and after (the first it changes or refuses).
	// Default 0: none.
	Sample int

	sampled *atomic.Int64        // the Changes kept by the pass's segments
	sel     *selection.Selection // Since, Until, Where and Select
	stopAt  time.Time            // the background window closes
	after   func()               // at the end of the pass
	dest    queue.Enqueuer
	rater   interface{ Rate() float32 }
	limiter *rate.Limiter // Rate's, nil without
}

// resolve fills in what a pass of o delivers into, and how fast.
func (o *RunOptions) resolve(c *restorerConfig) error {
	o.dest, o.rater = c.Queue, c.rater
	if o.Destination != "" {
		q, ok := c.Destinations[o.Destination]
		if !ok {
			return fmt.Errorf("%w: destination %q: this Restorer serves %s", ErrConfig, o.Destination, c.served())
		}
		o.dest = q
		o.rater, _ = q.(interface{ Rate() float32 })
	}
	switch {
	case o.Rate < 0:
		return fmt.Errorf("%w: RunOptions.Rate: %v is negative", ErrConfig, o.Rate)
	case o.Rate > 0:
		o.limiter = rate.NewLimiter(rate.Limit(o.Rate), max(1, int(o.Rate/100)))
	}
	if o.Sample < 0 {
		return fmt.Errorf("%w: RunOptions.Sample: %d is negative", ErrConfig, o.Sample)
	}
	o.sampled = new(atomic.Int64)
	if o.Area != AreaReady && o.Area != AreaQuarantine {
		return fmt.Errorf("%w: RunOptions.Area: %s: want ready or quarantine", ErrConfig, o.Area)
	}
	o.sel = selection.And(selection.TimeRange(o.Since, o.Until), selection.Where(o.Where), o.Select)
	if names, ok := o.sel.Segments(); ok && len(o.Segments) == 0 {
		o.Segments = names
		if len(names) == 0 {
			o.Segments = []string{} // names no segment at all
		}
	}
	switch {
	case o.Discard != "" && o.Area != AreaReady:
		return fmt.Errorf("%w: RunOptions.Discard: records are discarded from the ready area, not %s", ErrConfig, o.Area)
	case o.Discard != "" && o.sel.IsAll() && o.Segments == nil:
		return fmt.Errorf("%w: RunOptions.Discard: select what to discard (Select, Since, Until, Where or Segments); a pass without would discard every record", ErrConfig)
	}
	return nil
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
	st, err := r.refresh(ctx)
	if err != nil {
		return nil, err
	}
	if st.missing != nil {
		return nil, fmt.Errorf("dlqdump: restore: nothing to restore: %w", st.missing)
	}
	if !opts.DryRun {
		r.sweep(ctx, st.orphans)
	}
	opts.after = func() {
		if ctx.Err() != nil {
			return // the status loop refreshes; a cancelled pass returns now
		}
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

// ProgressEvery is how often, at most, RunOptions.OnProgress is called
// between checkpoints.
const ProgressEvery = 100 * time.Millisecond

// blockStop is an error OnBlock or OnProgress returned, or the cause of a
// RunOptions.Stop: it stops the whole pass.
type blockStop struct{ err error }

func (e *blockStop) Error() string { return e.err.Error() }
func (e *blockStop) Unwrap() error { return e.err }

// filtered reports whether only some records are selected; the others are
// then written to a new ready segment (the remainder) before the original is
// removed.
func (o *RunOptions) filtered() bool {
	return !o.Since.IsZero() || !o.Until.IsZero() || len(o.Where) > 0 || !o.Select.IsAll()
}

func (o *RunOptions) wants(name string) bool {
	if o.Segments == nil {
		return true
	}
	for _, s := range o.Segments {
		if s == name {
			return true
		}
	}
	return false
}

// Report counts what a pass did (or, with DryRun, would do).
type Report struct {
	// Segments counts segments completed (deleted or archived).
	Segments int
	// Delivered counts records the destination accepted.
	Delivered uint64
	// Retried counts refused enqueues that were retried.
	Retried uint64
	// Quarantined counts records set aside for quarantine, including those
	// of whole quarantined segments when known.
	Quarantined uint64
	// Skipped counts records the filters left in the dump.
	Skipped uint64
	// Bytes counts payload bytes delivered.
	Bytes uint64
	// QuarantinedSegments and DeletedSegments count whole segments moved
	// aside or deleted for their Version, their damage or their progress.
	QuarantinedSegments, DeletedSegments int
	// OtherVersionSegments counts the segments of another Version a
	// selective pass (Where, Since, Until) left in place, their records
	// counted in Skipped: only a pass over everything applies the
	// VersionPolicy.
	OtherVersionSegments int
	// SkippedSegments counts the segments a selective pass (Since, Until,
	// Where, Select) neither claimed nor read: their header, footer and
	// summary rule out every record it selects. Their records are not
	// counted in Skipped.
	SkippedSegments int
	// SideSegments counts the quarantine and remainder segments written.
	SideSegments int
	// LeftSegments counts the segments the pass left ready with records
	// its filters did not select (a selective pass leaves them where they
	// are, and the segment's progress lists them).
	LeftSegments int
	// Claimed counts the segments left alone because another restorer
	// holds them (or held them, until its claim is seen unchanged for its
	// lease); with RunOptions.WaitClaimed, those still held at the end of
	// the wait.
	Claimed int
	// DamagedBlocks counts blocks that could not be read.
	DamagedBlocks int
	// ReleasedDamagedBlocks counts the damaged blocks of segments released
	// from quarantine that the pass finished: their records cannot be
	// read, the quarantine reported them, and finishing the segment
	// deletes them with it (archives them, with Archive); a dry run
	// counts those it would.
	ReleasedDamagedBlocks int
	// Completed counts the segments whose previous holder had decided how
	// to finish them (delete, archive, quarantine, expire) and stopped past
	// its lease before it was done: the pass completed that decision
	// instead of restoring them (counted in Segments or
	// QuarantinedSegments too, an expired one in neither). Gone counts
	// those the pass found in no area, removed by someone without their
	// claim (logged, with their progress).
	Completed, Gone int
	// NoKeySegments counts the encrypted segments left in place because no
	// identity of Config.Encryption unwraps their data key (or it has
	// none): they were not restored, and the pass returns an error wrapping
	// ErrNoKey naming them. Counted on every pass that meets them, also
	// when this Restorer left them before.
	NoKeySegments int
	// ByReason counts delivered records by their HeaderReason ("" when
	// absent); in a dry run, the records that would be delivered, and
	// "quarantine: ..." entries for those that would be quarantined.
	ByReason map[string]uint64
	// Changes holds, in a dry run with a Transform, the first
	// RunOptions.Sample records it changed or refused, before and after.
	Changes []Change
}

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
				errs = append(errs, err)
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
// read each, SegmentsInFlight at once), and what was staged for a claim that
// ended before publishing it.
func (r *Restorer) sweep(ctx context.Context, names []string) {
	if _, err := r.claimer.SweepStaging(ctx); err != nil {
		r.log.Debug("removing staged segments that will not be published failed", slog.Any("error", err))
	}
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
	case rec.State == claims.StateOpen && perr == nil && p.Started() && !(p.Done && len(p.Aside) == 0):
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
