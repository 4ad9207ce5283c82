package dlqdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// One segment's run: it is claimed, opened and read block by block from its
// checkpoint, each record delivered or set aside, the run halted where it
// stops. The rest of it is carved out by concern: its checkpoints in
// restore_checkpoint.go, how its claim ends (finished, forgotten, released)
// in restore_end.go, a segment moved aside whole (quarantine, VersionPolicy)
// in restore_quarantine.go, a record's delivery in restore_deliver.go and
// restore_window.go, what a filtered pass leaves in restore_remainder.go and
// restore_sides.go, the round trips saved on S3 in restore_trips.go.

// segRun is the restoring of one segment, or its dry run: the same steps, so
// that a dry run reports what the real run would do.
type segRun struct {
	r    *Restorer
	opts *RunOptions
	rep  *Report
	name string
	dry  bool

	ctx   context.Context
	keep  *claims.Keeper // nil in a dry run
	ended bool           // the claim was released or finished
	// waits is ctx, cancelled too by RunOptions.Stop: the waits for the
	// destination's pace end on it (restore_stop.go).
	waits  context.Context
	halted error     // an OnProgress's error: the pass stops at the next record
	ticked time.Time // OnProgress was last called between checkpoints

	f     sink.File
	sr    *segment.Reader
	hdr   segment.Header
	found json.RawMessage // the progress as found in the record
	prog  claims.Progress

	// While the records a previous pass left are read (readRemainder):
	// the runs of blocks not reached yet, those of the block being read,
	// and its next record to handle.
	rescan   bool
	pending  []claims.Aside
	current  []claims.Aside
	cursor   uint64
	key      []byte // an encrypted segment's data key: the progress is signed with it
	lastSave time.Time
	filtered bool
	// sidesFound is the count of remainder side segments written from the
	// segment that the progress found by its claim listed (Report.Moved).
	sidesFound int
	// released: the segment was quarantined and released since (its
	// record says so); reported is then the damaged blocks its progress
	// counted, which that quarantine reported already.
	released bool
	reported int

	// Counted per record, added to the shared counters per block.
	delivered, bytes uint64
	reasons          reasonCounter

	blk     *segment.Block // the block being handled
	win     *window        // nil: one delivery at a time (Concurrency 1, dry run)
	holding bool           // the run holds the delivery token across blocks (restore_memory.go)
	// in connects the run to its pass's pipeline (restore_pipeline.go);
	// nil with one segment at a time.
	in *inFlight

	ahead   *ahead // the block's records transformed ahead; nil: none (restore_ahead.go)
	aheadOK bool   // the run transforms ahead (setAhead)

	// A carving run (restore_carve.go): it takes the records it selects
	// out of the segment (carved counts them) instead of delivering
	// them, into the side segments carvedSides names.
	carve       bool
	carved      uint64
	carvedSides []string
	// carving: a carving run is reading the segment; its checkpoints are
	// not written until its side segment is named (restore_carve.go).
	carving bool
}

// restoreSegment claims a segment (or, in a dry run, reads its progress) and
// restores it, as one of the segments in flight of its pass (in; nil: one
// segment at a time); a carving pass then restores the side segments it
// carved out of it (restore_carve.go).
func (r *Restorer) restoreSegment(ctx context.Context, name string, opts *RunOptions, rep *Report, in *inFlight) error {
	_, err := r.restoreWithSides(ctx, name, opts, rep, in)
	return err
}

// restoreWithSides is restoreSegment; moved reports whether the segment
// was gone or finished by another, or its progress listed side segments
// written from it (Report.Moved).
func (r *Restorer) restoreWithSides(ctx context.Context, name string, opts *RunOptions, rep *Report, in *inFlight) (moved bool, _ error) {
	res, err := r.restoreRun(ctx, name, opts, rep, in)
	moved = res.moved || errors.Is(err, ErrNotFound)
	if err != nil || len(res.carved) == 0 {
		return moved, err
	}
	return moved, r.restoreCarved(ctx, opts, res.carved, rep)
}

// runResult is what restoreRun tells its callers besides its error: the
// side segments it carved, and whether the segment was finished by another
// or its progress listed side segments written from it.
type runResult struct {
	carved []string
	moved  bool
}

// restoreRun is restoreSegment's run of the segment itself.
func (r *Restorer) restoreRun(ctx context.Context, name string, opts *RunOptions, rep *Report, in *inFlight) (res runResult, _ error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.closing, cancel) // Close stops the run too
	defer stop()
	g := &segRun{r: r, opts: opts, rep: rep, name: name, dry: opts.DryRun, ctx: ctx, filtered: opts.filtered(), in: in}
	g.carve = g.carves()
	defer func() { res.carved, res.moved = g.carvedSides, res.moved || g.sidesFound > 0 }()
	g.reasons.m = rep.ByReason
	var found json.RawMessage
	if g.dry {
		rec, live, err := r.claimer.Inspect(ctx, name)
		if err != nil {
			return res, err
		}
		if rec != nil && rec.State == claims.StateFinishing && rec.To != nil && !live {
			// A claim would complete what its holder decided.
			rep.Completed++
			return res, nil
		}
		if rec != nil {
			found = rec.Progress
			g.released = rec.State == claims.StateQuarantined
		}
	} else {
		cl, err := r.claim(ctx, name)
		var fin *claims.Finished
		if errors.As(err, &fin) {
			r.completed(fin, rep)
			res.moved = true // finished by the holder it waited for
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if moving := cl.Remote(); len(moving) > 0 {
			// Handed over to another store by dlqdump mv, which
			// completes it: restoring it here would deliver it twice.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopDeadline)
			defer cancel()
			_ = cl.Release(rctx)
			return res, fmt.Errorf("%w: segment %s is being moved to %s (run that dlqdump mv again to complete it)", ErrClaimed, name, moving[0].Remote)
		}
		g.keep = claims.Keep(ctx, cl, r.log)
		g.ctx = g.keep.Context()
		found = cl.Progress()
		g.released = cl.WasQuarantined()
		defer g.release()
		if r.c.Concurrency > 1 {
			g.win = newWindow(g, r.c.Concurrency)
			defer g.win.close() // before release: no delivery outlives the run
		}
	}
	g.waits = g.ctx
	if opts.Stop != nil {
		waits, cancel := context.WithCancelCause(g.ctx)
		defer cancel(nil)
		defer context.AfterFunc(opts.Stop, func() { cancel(context.Cause(opts.Stop)) })()
		g.waits = waits
	}
	g.lastSave = time.Now()
	g.found = found
	err := g.run(found)
	if g.f != nil {
		_ = g.f.Close()
	}
	if err != nil && g.lost() && !errors.Is(err, ErrLeaseLost) {
		// The keeper cancelled the run's context when the claim was
		// lost: whatever call that cut short, the claim's loss is why.
		err = fmt.Errorf("%w: segment %s: %w", ErrLeaseLost, name, err)
	}
	return res, err
}

// run restores the segment from found, the progress its record holds: it
// opens the segment, delivers the records from the checkpoint on (or reads
// those a previous pass left), then ends the claim.
func (g *segRun) run(found json.RawMessage) error {
	prog, err := claims.ParseProgress(found)
	if err != nil {
		return g.quarantineWhole("progress", fmt.Sprintf("its restore progress cannot be trusted (%v); records may have been delivered already", err), 0)
	}
	g.prog = prog
	g.sidesFound = prog.Remainders
	if g.released {
		g.reported = prog.Damaged
	}
	if g.prog.Successor != "" { // dlqdump rewrap was copying it
		if done, err := g.handedOver(); done || err != nil {
			return err
		}
	}
	if done, err := g.open(); done {
		return err
	}
	if err := g.checkProgress(); err != nil {
		return g.quarantineWhole("progress", err.Error(), 0)
	}
	if g.dry && len(g.prog.Carve) > 0 {
		if err := g.readCarved(); err != nil {
			return err
		}
	}
	if g.prog.Full() || len(g.prog.Carve) > 0 {
		// Records carved by a run that stopped before their side
		// segment was written (or before its progress dropped them):
		// written first, into the same side segment.
		if err := g.writeSides(g.prog.Full()); err != nil {
			return err
		}
	}
	if !g.prog.Done {
		start, fresh := g.prog, g.carve && len(g.prog.Aside) == 0 && len(g.prog.Carve) == 0
		g.carving = g.carve
		done, err := g.readToEnd()
		g.carving = false
		if done || err != nil {
			return err
		}
		if fresh && g.selectedAll(&start) {
			// Nothing to leave to others: delivered from the segment,
			// not copied (restore_carve.go).
			if done, err := g.uncarve(start); done || err != nil {
				return err
			}
		}
	} else if g.hasRemainder() {
		g.carving = g.carve
		err := g.readRemainder()
		g.carving = false
		if err != nil {
			return err
		}
	}
	g.in.delivered() // nothing more to deliver: the next segment may start
	if g.untouched() {
		return g.finish()
	}
	if err := g.writeSides(false); err != nil {
		return err
	}
	if g.hasRemainder() && g.prog.Damaged == 0 {
		return g.leave()
	}
	return g.finish()
}

// readToEnd handles the records from the position to the end of the
// segment; done reports that the run ends there, with err (nil when the
// segment was quarantined where it stopped).
func (g *segRun) readToEnd() (done bool, err error) {
	if err := g.readBlocks(); err != nil {
		if errors.Is(err, errSetAside) {
			return true, nil // quarantined where it stopped
		}
		return true, err
	}
	if !g.prog.Done { // the last block's checkpoint did not say so (no footer)
		g.prog.Done = true
		if g.carving {
			return false, nil // said by the save that names the side segment, or by the run's end
		}
		if err := g.save(true); err != nil {
			return true, err
		}
	}
	return false, nil
}

// open opens the segment and its reader, authenticates its progress when
// it is encrypted and applies the VersionPolicy to a segment of another
// version. done reports that the run ends there, with err (nil when the
// segment was quarantined, or deleted or left in place by the policy).
func (g *segRun) open() (done bool, err error) {
	area := sink.AreaReady
	if g.dry && g.opts.Area == AreaQuarantine {
		area = AreaQuarantine // a dry run releases nothing
	}
	g.f, err = g.r.c.Reader.Open(g.ctx, area, g.name)
	if errors.Is(err, sink.ErrNotFound) {
		if g.keep != nil {
			return true, g.gone(err)
		}
		return true, err
	}
	if err != nil {
		return true, err
	}
	g.f = g.keptOrKeep(g.f) // read from what a dry run kept (restore_kept.go)
	g.sr, err = segment.NewReaderContext(g.ctx, g.f, g.f.Size(), g.r.readerOptions(g.name))
	if err != nil {
		var ce *segment.CorruptError
		if !errors.As(err, &ce) {
			if handled, err2 := g.openFailed(err); handled {
				return true, err2
			}
			return true, err
		}
		return true, g.quarantineWhole("damaged", "unreadable: "+err.Error(), 0)
	}
	g.hdr = g.sr.Header()
	if dk := g.sr.DataKey(); dk != nil {
		g.key = dk.Key
		if done, err := g.authenticate(); done || err != nil {
			return true, err
		}
	}
	if v := Version(g.hdr.DataVersion); !g.r.versionOK(v) {
		return true, g.versionMismatch(v)
	}
	return false, nil
}

// readBlocks handles the records from the position on, checkpointing after
// every block. Blocks are decoded ahead, in parallel, by a segment.Stream.
func (g *segRun) readBlocks() error {
	pos := segment.Position{Offset: g.prog.Offset, Seq: g.prog.Seq}
	if err := g.sr.Seek(pos); err != nil {
		return g.quarantineWhole("progress", "its checkpoint is outside the segment: "+err.Error(), 0)
	}
	if plan := g.blockPlan(); plan != nil {
		return g.readPlanned(plan) // blocks it cannot select from are not read (restore_skip.go)
	}
	opts, alone := g.streamOptions()
	g.setAhead(opts, alone)
	if alone {
		// Its blocks do not fit its share of the read-ahead: it is read
		// as one segment at a time was, holding the delivery token from
		// its first block to its last (restore_memory.go).
		if err := g.r.takeDelivery(g.ctx); err != nil {
			if g.lost() {
				return err
			}
			return g.stop(pos, err)
		}
		g.holding = true
		defer func() { g.holding = false; g.r.giveDelivery() }()
	}
	st := segment.NewStream(g.sr, opts)
	atEnd, err := g.consume(st)
	_ = st.Close()
	if err != nil {
		return err
	}
	if !atEnd {
		return fmt.Errorf("dlqdump: segment %s: reading stopped at offset %d before the end; not completing it", g.name, g.prog.Offset)
	}
	end := g.sr.Pos()
	g.prog.Offset, g.prog.Seq = end.Offset, end.Seq
	return nil
}

// consume handles the stream's blocks until its end or an error. When the
// pass transforms ahead, the next block's records are transformed while
// the block before is handled (restore_ahead.go), outside the delivery
// token the segments in flight share.
func (g *segRun) consume(st *segment.Stream) (atEnd bool, err error) {
	b, err := st.Next(g.ctx)
	var a *ahead
	if b != nil && g.transformsAhead() {
		a = g.startAhead(b)
	}
	for {
		if err == io.EOF { // the bare sentinel: the reader reached the end
			return st.AtEnd(), nil
		}
		if err != nil {
			var ce *segment.CorruptError
			if errors.As(err, &ce) && errors.Is(err, segment.ErrTooLarge) {
				return false, g.tooLarge(err)
			}
			if errors.As(err, &ce) {
				g.damaged(err)
				b, err = st.Next(g.ctx)
				if b != nil && g.transformsAhead() {
					a = g.startAhead(b)
				}
				continue
			}
			if g.ctx.Err() != nil && !g.lost() {
				return false, g.stop(segment.Position{Offset: g.prog.Offset, Seq: g.prog.Seq}, err)
			}
			return false, err
		}
		var next *segment.Block
		var nextErr error
		var nextAhead *ahead
		if a != nil {
			// The next block is transformed while this one is delivered;
			// what Next says of it is handled after this one.
			next, nextErr = st.Next(g.ctx)
			if next != nil {
				nextAhead = g.startAhead(next)
			}
			a.wait()
		}
		g.ahead = a
		err = g.block(b)
		g.ahead = nil
		b.Release()
		if err != nil {
			if next != nil {
				nextAhead.abandon()
				next.Release()
			}
			return false, err
		}
		if a == nil {
			b, err = st.Next(g.ctx)
			continue
		}
		b, err, a = next, nextErr, nextAhead
	}
}

// errSetAside ends the reading of a segment that was quarantined at a block
// (tooLarge).
var errSetAside = errors.New("dlqdump: segment quarantined")

// tooLarge quarantines the segment at a block larger than the Restorer
// reads (Config.MaxRecordSize), err saying so. It is not damage: its
// progress stays at that block, so a Restorer that reads larger blocks
// goes on from there once the segment is released, and nothing is skipped.
// It returns errSetAside once quarantined.
func (g *segRun) tooLarge(err error) error {
	reason := fmt.Sprintf("%v: this Restorer reads blocks of up to %d bytes; release it to a Restorer with a larger Config.MaxRecordSize", err, g.r.c.maxBlock)
	var left int
	if ft := g.sr.Footer(); ft != nil && ft.Records > g.prog.Seq {
		left = int(ft.Records - g.prog.Seq) // from that block on
	}
	if err := g.quarantineWhole("too_large", reason, left); err != nil {
		return err
	}
	return errSetAside
}

// damaged records a damaged block: it is skipped, counted in the progress and
// reported when the segment is finished.
func (g *segRun) damaged(err error) {
	if g.prog.Damaged == 0 {
		g.prog.Damage = err.Error()
	}
	g.prog.Damaged++
	g.rep.DamagedBlocks++
	if !g.dry {
		g.r.mw.Fail("corrupt")
		g.r.log.Warn("skipping a damaged block", slog.String("segment", g.name), slog.Any("error", err))
	}
}

// block handles the records of one block, then checkpoints.
func (g *segRun) block(b *segment.Block) error {
	defer g.flushCounts()
	g.blk = b
	if err := g.handle(b, nil, segment.Position{Offset: g.prog.Offset, Seq: g.prog.Seq}); err != nil {
		return err
	}
	// Its deliveries ended: its memory is not needed for the checkpoint,
	// and the stream reads the next block meanwhile.
	b.Release()
	next := b.Next()
	g.prog.Offset, g.prog.Seq = next.Offset, next.Seq
	last := g.lastBlock(next)
	if last {
		g.prog.Done = true // in this checkpoint, not one more
	}
	if g.r.stopping.Load() || !g.opts.stopAt.IsZero() && time.Now().After(g.opts.stopAt) {
		return g.stop(next, errStop)
	}
	var err error
	if last {
		err = g.saveLast()
	} else {
		err = g.save(false)
	}
	if err != nil {
		return err
	}
	if g.opts.OnBlock != nil && !g.dry {
		g.flushCounts()
		if err := g.opts.OnBlock(*g.rep); err != nil {
			return g.stop(next, &blockStop{err})
		}
	}
	return nil
}

// handle handles the records of block b that want selects (every record
// when nil) while holding the Restorer's delivery token, so that the
// segments in flight deliver a block at a time, and with a window waits for
// their deliveries to end: every delivery of the block ends before its
// checkpoint, which is written once the token is given back. A run stopped
// while it waits for the token stops at at, the record it would handle
// first.
func (g *segRun) handle(b *segment.Block, want func(seq uint64) bool, at segment.Position) error {
	if !g.holding {
		if err := g.r.takeDelivery(g.ctx); err != nil {
			if g.lost() {
				return err // restoreSegment says the claim was lost
			}
			return g.stop(at, err)
		}
		defer g.r.giveDelivery()
	}
	err := g.handleRecords(b, want)
	if err != nil && stopsPass(err) {
		// Before the token goes to another segment, which would
		// deliver into a destination that is down, or with a claim as
		// likely lost as this one.
		g.in.stopPass(err)
	}
	return err
}

// handleRecords handles the records of b that want selects (every record
// when nil), for handle.
func (g *segRun) handleRecords(b *segment.Block, want func(seq uint64) bool) error {
	for rec := range b.Records() {
		if want != nil && !want(rec.Seq) {
			continue
		}
		if err := g.record(&rec); err != nil {
			return g.halt(rec.Seq, err)
		}
	}
	if g.win != nil {
		if err := g.win.drain(); err != nil {
			return g.halt(b.Next().Seq, err)
		}
	}
	return nil
}

// halt ends the run of the block on an error met at record seq of it, or at
// an earlier record still in the window (a *recordError names it; the
// outcomes before an error met at seq are applied first). A stop (Limit,
// Close, the pass's context, ErrUnavailable) is recorded at the record it
// concerns, which is the next to handle.
func (g *segRun) halt(seq uint64, err error) error {
	if g.win != nil {
		var re *recordError
		var bs *blockStop
		if !errors.As(err, &re) && (errors.Is(err, errStop) || errors.As(err, &bs)) {
			// The deliveries before the limit, or the stop, end as
			// they would.
			if derr := g.win.drain(); derr != nil {
				err = derr
			}
		}
		if errors.As(err, &re) {
			seq, err = re.seq, re.err
		}
		g.win.abandon()
	}
	if errors.Is(err, ErrUnavailable) {
		err = fmt.Errorf("%w; stopped at segment %s record %d, its next to deliver", err, g.name, seq)
	}
	var bs *blockStop
	if errors.Is(err, errStop) || errors.As(err, &bs) || errors.Is(err, ErrUnavailable) || g.ctx.Err() != nil && !g.lost() {
		// Stop at this record: it is the next to handle.
		return g.stop(segment.Position{Offset: g.blk.Info().Offset, Seq: seq}, err)
	}
	return err
}

// flushCounts adds the block's counts to the Restorer's and the report's.
func (g *segRun) flushCounts() {
	if g.delivered > 0 && !g.dry {
		g.r.restored.Add(g.delivered)
		g.r.bytes.Add(g.bytes)
		g.r.mw.Restore(int(g.delivered), int(g.bytes))
	}
	g.delivered, g.bytes = 0, 0
	g.reasons.flush()
}
