package dlqdump

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
)

// pipeline restores the segments of a pass several at a time, so that the
// round trips of one (its claim, its reads, its checkpoints, its finish:
// deleting it and its record) overlap those of the others. Each segment
// delivers in its own order and checkpoints after each block, so a crash
// delivers at most one block twice per segment in flight; the deliveries of
// different segments overlap, a block at a time: a run holds the Restorer's
// delivery token (Restorer.delivering) while it hands a block's records to
// the destination, and lets it go before the block's checkpoint, whose round
// trip overlaps the other segments' deliveries. So the destination sees at
// most Config.Concurrency Enqueue calls at once, as with one segment, and
// whole blocks of a segment, in the segment's order.
//
// A run that stops the pass (a stop, the destination unavailable, a lost
// claim: stopsPass) cancels the others, which save where they stopped at
// their next record, and Run reports why the pass stopped.
//
// A feeding goroutine starts the runs in the pass's order: at most depth
// (Config.SegmentsInFlight) of them between their claim and their last
// checkpoint, the segments in flight that the crash bound counts, and as
// many more being finished (writing side segments, deleting the segment and
// its record), which deliver nothing: a segment's place goes to the next
// once its deliveries are durable (inFlight.delivered), so that its finish's
// round trips overlap the next segment's. Run takes their outcomes in the
// pass's order (restore) and stop ends the pipeline. With depth 1 there is
// no feeder: a segment is restored when Run asks for it, into the pass's
// report.
//
// The pass's order is the listing's, oldest first, until other restorers
// show (they held claims when the pass listed the store, or a run met one of
// their claims): from there on the listing is cut into parts (a 256th of it,
// from 64 segments to a page of 1000; a smaller listing's eighths, of at
// least 8 segments), taken in a random order (each oldest
// first), so that restorers spread over the listing instead of all trying
// the same segments; a part is looked at (its page of the listing, and the
// records) before it is started. A part the look finds others holding
// segments of, and the rest of the part where a run first met another
// restorer's claim, are taken from their newest end (turnLocked): the two
// meet in the part's middle, where one would otherwise lose every segment
// it has in flight at the other's frontier, and the last parts of a drain
// are shared instead of left each to one restorer. A part where a run meets
// another's claim again is left to it. A segment whose claim was live when the
// pass listed the store is left to its holder without a request (the
// listing's look at its record keeps observing it, so that a holder that
// stopped is taken over once its lease passes); when a run meets another
// restorer's work since the listing, the feeder looks at the store again in
// the background and meanwhile goes on starting what it knows to be free.
type pipeline struct {
	r        *Restorer
	opts     *RunOptions
	names    []string
	partSize int   // segments in a part of the listing
	order    []int // positions to indexes of names; nil: the listing's order (under mu)
	pos      []int // indexes to positions; nil with order (under mu)
	depth    int
	ctx      context.Context
	cancel   context.CancelFunc
	fed      sync.WaitGroup // the feeding goroutine and its looks
	runs     sync.WaitGroup // the segments' runs

	mu      sync.Mutex
	changed *sync.Cond       // a job was started or the feeder moved on
	next    int              // the feeder's position in the order
	runAt   int              // Run's position in the order
	jobs    map[int]*segJob  // started, not yet taken by Run, by index
	passed  map[int]error    // passed over by the feeder, with why (see others)
	stopped bool             // stop was called
	cause   error            // why a run stopped the pass, cancelling the others
	taken   map[*segJob]bool // taken by Run
	all     []*segJob        // every job started

	// What other restorers did since the pass's listing, learnt when a
	// run met it (a segment claimed or finished by another): the feeder
	// lists the store again and passes over what is no longer to be had.
	// started, elsewhere and gone are under mu; left is the feeder's.
	listed        *storeStatus    // the refresh the pass listed the store with
	looking       atomic.Bool     // a look at the store again is under way (others)
	relistRecords atomic.Bool     // a run met another restorer's claim
	relistReady   atomic.Bool     // a run met a segment another restorer finished
	started       map[string]bool // the names this pass started
	elsewhere     map[string]bool // claimed by others since the listing
	gone          map[string]bool // no longer ready
	met           atomic.Int64    // 1 + the part where a run met another's claim
	left          int             // 1 + the part being passed over
	turned        map[int]bool    // parts taken newest first (under mu)
}

// segJob is the run of one segment.
type segJob struct {
	name string
	rep  Report
	err  error
	done chan struct{}
	in   inFlight
}

// inFlight connects a segment's run to the pipeline of its pass. Its
// methods do nothing on a nil *inFlight (one segment at a time).
type inFlight struct {
	pl   *pipeline
	slot func() // gives the segment's place among those delivering back
	once sync.Once
}

// delivered says that the segment's deliveries are durable (its progress
// says it is done) or over (its run ended): what is left of its run
// (writing its side segments, deleting it and its record) puts no record
// at risk, and its place among the segments delivering goes to the next.
// It may be called more than once.
func (in *inFlight) delivered() {
	if in != nil && in.slot != nil {
		in.once.Do(in.slot)
	}
}

// stopPass stops the other segments of the pass (see pipeline.halt).
func (in *inFlight) stopPass(err error) {
	if in != nil {
		in.pl.halt(err)
	}
}

// segmentsInFlight returns how many segments a pass with opts works on at
// once: one for a dry run, for a pass with a Limit, an OnBlock or an
// OnProgress (which count what the segments before did) and for a pass
// over the quarantine (which releases each segment into the ready area
// before its run), for a carving pass (which restores the side segments it
// carves after each segment: they would be in flight beside the next
// ones), Config.SegmentsInFlight otherwise.
func (r *Restorer) segmentsInFlight(opts *RunOptions) int {
	if opts.DryRun || opts.Limit > 0 || opts.OnBlock != nil || opts.OnProgress != nil || opts.Area == AreaQuarantine || opts.Carve {
		return 1
	}
	return r.c.SegmentsInFlight
}

// newPipeline starts restoring names, the ready segments of a pass.
func (r *Restorer) newPipeline(ctx context.Context, opts *RunOptions, names []string) *pipeline {
	ctx, cancel := context.WithCancel(ctx)
	pl := &pipeline{r: r, opts: opts, names: names, depth: r.segmentsInFlight(opts), ctx: ctx, cancel: cancel,
		partSize: partSize(len(names)),
		jobs:     map[int]*segJob{}, passed: map[int]error{}, taken: map[*segJob]bool{}, started: map[string]bool{}}
	pl.changed = sync.NewCond(&pl.mu)
	if len(opts.Segments) == 0 {
		// The listing this pass made (passNames); a pass over named
		// segments made none, and the last one's may be older than
		// what its caller saw since (a claim it watched expire).
		pl.listed = r.status.Load()
	}
	if pl.depth > 1 {
		if st := pl.listed; st != nil && st.claimed > 0 {
			pl.mu.Lock()
			pl.shuffleLocked()
			pl.mu.Unlock()
		}
		pl.fed.Add(1)
		go pl.feed()
	}
	return pl
}

// startable reports whether the feeder starts the segment ahead: Run would
// restore it. (What Run skips for this reason only grows during a pass, so
// Run never asks for a segment the feeder passed over.)
func (pl *pipeline) startable(name string) bool {
	if !pl.opts.wants(name) {
		return false
	}
	pl.r.mu.Lock()
	_, skipped := pl.r.skip[name]
	pl.r.mu.Unlock()
	return !skipped
}

// feed starts the runs in listing order: at most depth of them claiming,
// reading and delivering their segments at once, and as many more ending
// (writing side segments, deleting the segment and its record), which
// delivers nothing.
func (pl *pipeline) feed() {
	defer pl.fed.Done()
	defer func() {
		pl.mu.Lock()
		pl.next = len(pl.names)
		pl.changed.Broadcast()
		pl.mu.Unlock()
	}()
	slots := make(chan struct{}, 2*pl.depth) // runs
	delivering := make(chan struct{}, pl.depth)
	looked := -1 // the part looked at last
	for k := 0; k < len(pl.names); k++ {
		if pl.ctx.Err() != nil {
			return
		}
		pl.mu.Lock()
		i := pl.atLocked(k)
		pl.mu.Unlock()
		name := pl.names[i]
		if pl.startable(name) {
			select {
			case slots <- struct{}{}:
			case <-pl.ctx.Done():
				return
			}
			select {
			case delivering <- struct{}{}:
			case <-pl.ctx.Done():
				<-slots
				return
			}
			// turn takes the rest of names[i]'s part from its newest
			// end (turnLocked); then the feeder starts again at k,
			// from there.
			turn := func(met bool) bool {
				pl.mu.Lock()
				turned := pl.turnLocked(k, i, met)
				pl.mu.Unlock()
				if turned {
					<-delivering
					<-slots
				}
				return turned
			}
			if m := int(pl.met.Swap(0)); m > 0 {
				pl.mu.Lock()
				shuffled := pl.order != nil
				pl.shuffleLocked() // other restorers work here: spread out
				pl.mu.Unlock()
				if shuffled && m-1 == pl.part(i) && turn(true) {
					// Met at its frontier: the rest of the part
					// from its newest end instead.
					k--
					continue
				}
				if shuffled {
					pl.left = m // leave the part where one works to it
				}
			}
			pl.mu.Lock()
			shuffled := pl.order != nil
			pl.mu.Unlock()
			if shuffled && pl.part(i) != looked {
				looked = pl.part(i) // a part in the random order: look at it first
				pl.relistRecords.Store(false)
				pl.relistReady.Store(false)
				pl.others(i, true, true)
				if turn(false) {
					// Another works from the part's oldest end: take
					// it from its newest, to meet in its middle.
					k--
					continue
				}
			} else if pl.looking.Load() {
				// A look is on its way: start what is known not
				// taken, as the look will.
			} else if records, ready := pl.relistRecords.Swap(false), pl.relistReady.Swap(false); records || ready {
				pl.looking.Store(true)
				pl.fed.Go(func() {
					defer pl.looking.Store(false)
					pl.others(i, records, ready)
				})
			}
			pl.mu.Lock()
			if err := pl.elsewhereLocked(i, name); err != nil {
				pl.passed[i] = err
				<-delivering
				<-slots
			} else if j := pl.startLocked(i, name, func() { <-delivering }, func() { <-slots }); j == nil {
				pl.mu.Unlock()
				return
			}
			pl.mu.Unlock()
		}
		pl.mu.Lock()
		pl.next = k + 1
		pl.changed.Broadcast()
		pl.mu.Unlock()
	}
}

// startLocked starts the run of names[i]; delivered is called once its
// deliveries are over (see inFlight.delivered), ended when it ends. It
// returns nil once stopped.
func (pl *pipeline) startLocked(i int, name string, delivered, ended func()) *segJob {
	if pl.stopped {
		delivered()
		ended()
		return nil
	}
	j := &segJob{name: name, rep: Report{ByReason: map[string]uint64{}}, done: make(chan struct{})}
	j.in = inFlight{pl: pl, slot: delivered}
	pl.jobs[i] = j
	pl.started[name] = true
	pl.all = append(pl.all, j)
	pl.changed.Broadcast()
	pl.runs.Add(1)
	go func() {
		defer pl.runs.Done()
		defer ended()
		defer j.in.delivered()
		j.err = pl.r.restoreSegment(pl.ctx, name, pl.opts, &j.rep, &j.in)
		if pl.stopsPass(j.err) {
			pl.halt(j.err)
		}
		switch { // another restorer works here
		case errors.Is(j.err, ErrClaimed):
			pl.relistRecords.Store(true)
			pl.met.Store(int64(pl.part(i)) + 1)
		case errors.Is(j.err, ErrNotFound):
			pl.relistReady.Store(true)
		}
		close(j.done)
	}()
	return j
}

// stopsPass reports whether a run that ended with err stops the pass: it
// was stopped (Limit, Close, a window closing), the destination is
// unavailable, or the segment's claim was lost. A lost claim means this
// process stalled past its lease (or lost the store): the claims of the
// other segments in flight, taken as long ago, are as likely lost, and each
// of them delivering a block more before learning it would add to what a
// taker delivers again.
func stopsPass(err error) bool {
	return errors.Is(err, errStop) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLeaseLost)
}

// stopsPass reports whether a run that ended with err stops the pass, or
// ended because it stopped (the pass's context, Close).
func (pl *pipeline) stopsPass(err error) bool {
	return err != nil && (stopsPass(err) || pl.ctx.Err() != nil || pl.r.closing.Err() != nil)
}

// halt stops the other runs of the pass, which save where they stopped, and
// keeps err as why the pass stopped, unless it stopped already (err is then
// the cancellation's consequence).
func (pl *pipeline) halt(err error) {
	pl.mu.Lock()
	if pl.cause == nil && pl.ctx.Err() == nil {
		pl.cause = err
	}
	pl.mu.Unlock()
	pl.cancel()
}

// restore returns the outcome of names[i], which Run restores now: its
// report is added to rep.
func (pl *pipeline) restore(i int, rep *Report) error {
	if pl.depth <= 1 {
		// One at a time, counting into the pass's report (which a
		// Limit checks).
		return pl.r.restoreSegment(pl.ctx, pl.names[i], pl.opts, rep, nil)
	}
	pl.mu.Lock()
	for pl.next <= pl.positionLocked(i) && pl.jobs[i] == nil && !pl.stopped {
		pl.changed.Wait()
	}
	if cause := pl.cause; cause != nil && pl.jobs[i] == nil {
		pl.mu.Unlock()
		return cause // not started: the pass stopped
	}
	if err, ok := pl.passed[i]; ok {
		delete(pl.passed, i)
		pl.mu.Unlock()
		return err
	}
	j := pl.jobs[i]
	if j == nil {
		// Not started ahead: now, after everything started.
		j = pl.startLocked(i, pl.names[i], func() {}, func() {})
	}
	if j != nil {
		delete(pl.jobs, i)
		pl.taken[j] = true
	}
	pl.mu.Unlock()
	if j == nil {
		return pl.ctx.Err()
	}
	<-j.done
	rep.add(&j.rep)
	pl.mu.Lock()
	cause := pl.cause
	pl.mu.Unlock()
	if j.err != nil && cause != nil {
		// Cut short by another run that stopped the pass (or that run
		// itself): why the pass stopped.
		return cause
	}
	return j.err
}

// end stops the pipeline, adding to rep what the runs not taken by Run did,
// and returns rep.
func (pl *pipeline) end(rep *Report) Report {
	pl.stop(rep)
	return *rep
}

// stop ends the pipeline: the runs not taken by Run are cancelled (they save
// where they stopped and release their claims) and waited for, and what they
// did is added to rep (when not nil). Only the first call does anything.
func (pl *pipeline) stop(rep *Report) {
	pl.mu.Lock()
	if pl.stopped {
		pl.mu.Unlock()
		return
	}
	pl.stopped = true
	pl.changed.Broadcast()
	pl.mu.Unlock()
	pl.cancel()
	pl.fed.Wait()
	pl.runs.Wait()
	for _, j := range pl.all {
		if pl.taken[j] {
			continue
		}
		if rep != nil {
			rep.add(&j.rep)
		}
		if j.err != nil && !errors.Is(j.err, context.Canceled) {
			pl.r.log.Debug("a segment started ahead of a pass that stopped", slog.String("segment", j.name), slog.Any("error", j.err))
		}
	}
}

// add adds the counts of o to rep.
func (rep *Report) add(o *Report) {
	rep.Segments += o.Segments
	rep.Delivered += o.Delivered
	rep.Retried += o.Retried
	rep.Quarantined += o.Quarantined
	rep.Skipped += o.Skipped
	rep.Bytes += o.Bytes
	rep.QuarantinedSegments += o.QuarantinedSegments
	rep.DeletedSegments += o.DeletedSegments
	rep.OtherVersionSegments += o.OtherVersionSegments
	rep.SideSegments += o.SideSegments
	rep.Carved += o.Carved
	rep.LeftSegments += o.LeftSegments
	rep.Claimed += o.Claimed
	rep.Moved += o.Moved
	rep.DamagedBlocks += o.DamagedBlocks
	rep.ReleasedDamagedBlocks += o.ReleasedDamagedBlocks
	rep.Completed += o.Completed
	rep.Gone += o.Gone
	rep.NoKeySegments += o.NoKeySegments
	rep.SkippedSegments += o.SkippedSegments
	if rep.ByReason == nil && len(o.ByReason) > 0 {
		rep.ByReason = map[string]uint64{}
	}
	for k, v := range o.ByReason {
		rep.ByReason[k] += v
	}
	rep.Changes = append(rep.Changes, o.Changes...)
}

// seenPage is how many names a look at the ready segments ahead lists: one
// page of an S3 listing.
const seenPage = 1000
