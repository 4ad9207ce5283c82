package dlqdump

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/koykov/queue"
	"golang.org/x/time/rate"

	"github.com/dlqdump/dlqdump/selection"
)

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
	// KeepForPass, with DryRun, keeps in memory the bytes of the segments
	// the dry run opens that are small enough to be read whole anyway (up
	// to 256 KiB each, 4 MiB in all), for the Restorer's next Run: that
	// pass (a restore job's after its estimate) claims and opens each
	// segment as it would, then reads it from what was kept instead of
	// the store, and lets them all go when it returns (as does Close).
	// Default false: a dry run keeps nothing.
	KeepForPass bool
	// Segments restricts the pass to these segment names.
	Segments []string
	// Area is where the pass takes segments from: AreaReady, or
	// AreaQuarantine to release quarantined segments (those Segments
	// names, or all) into the ready area one at a time and restore them,
	// as dlqdump quarantine release and a restore would. A segment whose
	// claim record is held (its holder still ending its move to
	// quarantine) stays there for a later pass (Report.Claimed); one whose
	// holder decided that move and stopped before ending it has it ended
	// first. Default AreaReady.
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
	// Carve, with a selective pass (Since, Until, Where, Select) that
	// does not Discard, takes the records the pass selects out of a
	// segment instead of delivering them from it: while it holds the
	// segment's claim it copies them (those not yet delivered, within
	// Limit) into a ready side segment of their own, saves the segment's
	// progress without them (the records it does not select stay listed
	// there, and the segment stays ready) and releases the segment at
	// once; then it restores that side segment at its pace. So the
	// segment is held only for the copy, and passes whose selections are
	// disjoint (restore jobs at a slow Rate) deliver from it at the same
	// time; with overlapping selections a record carved by one is gone
	// from the segment, and delivered once (a side segment another pass
	// holds when this one comes to it is waited for with WaitClaimed,
	// and counted in Report.Claimed otherwise or once the wait is over). It costs a copy of the
	// selected records (on S3 a few more requests per segment: the side
	// segment's record, its staging, its move and the checkpoints around
	// them). A carving pass works on one segment at a time
	// (Config.SegmentsInFlight does not apply). A progress listing carved
	// records not yet in their side segment stores them as records set
	// aside for quarantine with a reason saying so, so that a dlqdump
	// from before carving quarantines them (or the whole segment) rather
	// than losing them; still, run this version on every restorer before
	// jobs carve (docs/RELIABILITY.md). A pass whose Select uses the
	// "segment" field does not carve (its side segments, under other
	// names, would not be selected again). Side segments carry a summary
	// unless Config.NoSummary, so that passes selecting none of a carved
	// side segment's records skip it; with NoSummary they read it. Restore jobs with a
	// selection and a Rate carve (package jobs). Default false: a pass
	// delivers from the segment while it holds it.
	Carve bool
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
	// SideSegments counts the quarantine, remainder and carved segments
	// written.
	SideSegments int
	// Carved counts the records a carving pass (RunOptions.Carve) copied
	// out of segments into side segments of their own, to deliver from
	// there (counted in Delivered once delivered).
	Carved uint64
	// LeftSegments counts the segments the pass left ready with records
	// its filters did not select (a selective pass leaves them where they
	// are, and the segment's progress lists them).
	LeftSegments int
	// Claimed counts the segments left alone because another restorer
	// holds them (or held them, until its claim is seen unchanged for its
	// lease); with RunOptions.WaitClaimed, those still held at the end of
	// the wait.
	Claimed int
	// Moved counts the segments the pass waited for (RunOptions.WaitClaimed:
	// another pass held them) and then found gone, or holding side
	// segments written from them: their holder may have copied records the
	// pass selects into new segments (a remainder, when its progress was
	// full) that the pass's listing did not have. A restore job runs
	// another pass when it is not zero, as for Claimed.
	Moved int
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
