package dlqdump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

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
	// released: the segment was quarantined and released since (its
	// record says so); reported is then the damaged blocks its progress
	// counted, which that quarantine reported already.
	released bool
	reported int

	// Counted per record, added to the shared counters per block.
	delivered, bytes uint64
	reasons          reasonCounter

	blk  *segment.Block // the block being handled
	win  *window        // nil: one delivery at a time (Concurrency 1, dry run)
	turn *turn          // when the segment may deliver (restore_pipeline.go); nil: now
}

// stopDeadline bounds the writes that record where a cancelled run stopped.
const stopDeadline = 5 * time.Second

// Finishing a segment is tried finishAttempts times, within finishDeadline.
const (
	finishAttempts  = 4
	finishRetryBase = 20 * time.Millisecond
	finishDeadline  = 30 * time.Second
)

// restoreSegment claims a segment (or, in a dry run, reads its progress) and
// restores it, delivering once its turn came (nil: at once).
func (r *Restorer) restoreSegment(ctx context.Context, name string, opts *RunOptions, rep *Report, t *turn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.closing, cancel) // Close stops the run too
	defer stop()
	g := &segRun{r: r, opts: opts, rep: rep, name: name, dry: opts.DryRun, ctx: ctx, filtered: opts.filtered(), turn: t}
	g.reasons.m = rep.ByReason
	var found json.RawMessage
	if g.dry {
		rec, _, err := r.claimer.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if rec != nil {
			found = rec.Progress
			g.released = rec.State == claims.StateQuarantined
		}
	} else {
		cl, err := r.claim(ctx, name)
		if err != nil {
			return err
		}
		if moving := cl.Remote(); len(moving) > 0 {
			// Handed over to another store by dlqdump mv, which
			// completes it: restoring it here would deliver it twice.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopDeadline)
			defer cancel()
			_ = cl.Release(rctx)
			return fmt.Errorf("%w: segment %s is being moved to %s (run that dlqdump mv again to complete it)", ErrClaimed, name, moving[0].Remote)
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
	return err
}

// release stops the claim's keeper and, unless the run ended the claim,
// releases it, keeping the last saved progress.
func (g *segRun) release() {
	g.keep.Stop()
	if g.ended || g.keep.Lost() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stopDeadline)
	defer cancel()
	// The progress of the last block handled, which a CheckpointInterval
	// may have kept from the record so far: a pass ended by an error
	// resumes there, not at an older checkpoint.
	if err := g.keep.Flush(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		g.r.log.Warn("recording where a segment stopped failed; it resumes at its last checkpoint", slog.String("segment", g.name), slog.Any("error", err))
	}
	if err := g.keep.Claim().Release(ctx); err != nil && !errors.Is(err, ErrLeaseLost) {
		g.r.log.Warn("releasing a claim failed; it is taken over after its lease", slog.String("segment", g.name), slog.Any("error", err))
	}
}

func (g *segRun) run(found json.RawMessage) error {
	r := g.r
	prog, err := claims.ParseProgress(found)
	if err != nil {
		return g.quarantineWhole("progress", fmt.Sprintf("its restore progress cannot be trusted (%v); records may have been delivered already", err), 0)
	}
	g.prog = prog
	if g.released {
		g.reported = prog.Damaged
	}
	if g.prog.Successor != "" { // dlqdump rewrap was copying it
		if done, err := g.handedOver(); done || err != nil {
			return err
		}
	}
	area := sink.AreaReady
	if g.dry && g.opts.Area == AreaQuarantine {
		area = AreaQuarantine // a dry run releases nothing
	}
	g.f, err = r.c.Reader.Open(g.ctx, area, g.name)
	if errors.Is(err, sink.ErrNotFound) {
		if g.keep != nil {
			// An earlier holder finished it: drop the stale record.
			if err := g.keep.Claim().Forget(context.WithoutCancel(g.ctx)); err == nil {
				g.ended = true
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	g.sr, err = segment.NewReaderContext(g.ctx, g.f, g.f.Size(), r.readerOptions(g.name))
	if err != nil {
		var ce *segment.CorruptError
		if !errors.As(err, &ce) {
			if handled, err2 := g.openFailed(err); handled {
				return err2
			}
			return err
		}
		return g.quarantineWhole("damaged", "unreadable: "+err.Error(), 0)
	}
	g.hdr = g.sr.Header()
	if dk := g.sr.DataKey(); dk != nil {
		g.key = dk.Key
		if done, err := g.authenticate(); done || err != nil {
			return err
		}
	}
	if v := Version(g.hdr.DataVersion); !r.versionOK(v) {
		return g.versionMismatch(v)
	}
	if err := g.checkProgress(); err != nil {
		return g.quarantineWhole("progress", err.Error(), 0)
	}
	if g.prog.Full() {
		if err := g.writeSides(true); err != nil {
			return err
		}
	}
	if !g.prog.Done {
		if err := g.readBlocks(); err != nil {
			return err
		}
		if !g.prog.Done { // the last block's checkpoint did not say so (no footer)
			g.prog.Done = true
			if err := g.save(true); err != nil {
				return err
			}
		}
	} else if g.hasRemainder() {
		if err := g.readRemainder(); err != nil {
			return err
		}
	}
	g.turn.pass() // its deliveries are durable: the next segment's may start
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

// checkProgress checks the saved position against the segment: it must be
// the start, the end, or a record of a block. A position the segment does
// not have (a stale or damaged record) is an error: the segment is kept.
func (g *segRun) checkProgress() error {
	p := g.prog
	if !p.Started() && len(p.Aside) == 0 {
		return nil
	}
	ft := g.sr.Footer()
	if ft == nil {
		if p.Done {
			return errors.New("its progress says it is done, but it has no footer to check that against")
		}
		return nil // unsealed: checked block by block as it is read
	}
	if !g.positionOK(ft) || p.Done && (p.Offset != g.blocksEnd(ft) || p.Seq != ft.Records) {
		return fmt.Errorf("its checkpoint (offset %d, record %d) is not a record of the segment (%d blocks, %d records): the record holding it is stale or damaged", p.Offset, p.Seq, len(ft.Blocks), ft.Records)
	}
	return g.checkAside(ft)
}

// positionOK reports whether the progress's position is the start, the end
// or a record of a block.
func (g *segRun) positionOK(ft *segment.Footer) bool {
	p := g.prog
	if p.Offset == 0 && p.Seq == 0 || p.Offset == g.sr.Start() && p.Seq == 0 {
		return true
	}
	for _, b := range ft.Blocks {
		if b.Offset == p.Offset && p.Seq >= b.FirstSeq && p.Seq < b.FirstSeq+uint64(b.Count) {
			return true
		}
	}
	return p.Offset == g.blocksEnd(ft) && p.Seq == ft.Records
}

// checkAside checks that every run set aside lies in a block before the
// position.
func (g *segRun) checkAside(ft *segment.Footer) error {
	for _, a := range g.prog.Aside {
		ok := false
		for _, b := range ft.Blocks {
			if b.Offset == a.Offset && a.From >= b.FirstSeq && a.To <= b.FirstSeq+uint64(b.Count) {
				ok = a.To <= g.prog.Seq
				break
			}
		}
		if !ok {
			return fmt.Errorf("its progress sets aside records %d..%d at offset %d, which the segment does not have before the checkpoint", a.From, a.To, a.Offset)
		}
	}
	return nil
}

// blocksEnd returns the offset after the last block.
func (g *segRun) blocksEnd(ft *segment.Footer) int64 {
	if n := len(ft.Blocks); n > 0 {
		last := ft.Blocks[n-1]
		return last.Offset + segment.BlockHeaderSize + int64(last.StoredLen)
	}
	return g.sr.Start()
}

// readBlocks handles the records from the position on, checkpointing after
// every block. Blocks are decoded ahead, in parallel, by a segment.Stream.
func (g *segRun) readBlocks() error {
	if err := g.turn.wait(g.ctx); err != nil {
		return err // stopped before delivering anything
	}
	pos := segment.Position{Offset: g.prog.Offset, Seq: g.prog.Seq}
	if err := g.sr.Seek(pos); err != nil {
		return g.quarantineWhole("progress", "its checkpoint is outside the segment: "+err.Error(), 0)
	}
	st := segment.NewStream(g.sr, nil)
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

// consume handles the stream's blocks until its end or an error.
func (g *segRun) consume(st *segment.Stream) (atEnd bool, err error) {
	for {
		b, err := st.Next(g.ctx)
		if err == io.EOF { // the bare sentinel: the reader reached the end
			return st.AtEnd(), nil
		}
		if err != nil {
			var ce *segment.CorruptError
			if errors.As(err, &ce) {
				g.damaged(err)
				continue
			}
			if g.ctx.Err() != nil && !g.lost() {
				return false, g.stop(segment.Position{Offset: g.prog.Offset, Seq: g.prog.Seq}, err)
			}
			return false, err
		}
		err = g.block(b)
		b.Release()
		if err != nil {
			return false, err
		}
	}
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
	for rec := range b.Records() {
		if err := g.record(&rec); err != nil {
			return g.halt(rec.Seq, err)
		}
	}
	if g.win != nil {
		// Every delivery of the block ends before its checkpoint.
		if err := g.win.drain(); err != nil {
			return g.halt(b.Next().Seq, err)
		}
	}
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

// halt ends the run of the block on an error met at record seq of it, or at
// an earlier record still in the window (a *recordError names it; the
// outcomes before an error met at seq are applied first). A stop (Limit,
// Close, the pass's context, ErrUnavailable) is recorded at the record it
// concerns, which is the next to handle.
func (g *segRun) halt(seq uint64, err error) error {
	if g.win != nil {
		var re *recordError
		if !errors.As(err, &re) && errors.Is(err, errStop) {
			err = g.win.drain() // the deliveries before the limit end as they would
			if err == nil {
				err = errStop
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
	if errors.Is(err, errStop) || errors.Is(err, ErrUnavailable) || g.ctx.Err() != nil && !g.lost() {
		// Stop at this record: it is the next to handle.
		return g.stop(segment.Position{Offset: g.blk.Info().Offset, Seq: seq}, err)
	}
	return err
}

// lost reports whether the claim was lost (then nothing is saved).
func (g *segRun) lost() bool { return g.keep != nil && g.keep.Lost() }

// save records the progress: now when force is set or CheckpointInterval
// passed since the last write, otherwise with the next renewal.
func (g *segRun) save(force bool) error {
	if g.dry {
		return nil
	}
	p := g.marshal()
	if !force && time.Since(g.lastSave) < g.r.c.CheckpointInterval {
		g.keep.SetProgress(p)
		return nil
	}
	if err := g.keep.Save(g.ctx, p); err != nil {
		return fmt.Errorf("dlqdump: checkpoint segment %s: %w", g.name, err)
	}
	g.lastSave = time.Now()
	return nil
}

// stop ends the run at pos: the progress is saved (with a deadline of its
// own when the run was cancelled) and the claim released.
func (g *segRun) stop(pos segment.Position, cause error) error {
	if g.rescan {
		g.cursor = pos.Seq // the position stays at the end
	} else {
		g.prog.Offset, g.prog.Seq = pos.Offset, pos.Seq
	}
	if g.dry {
		return cause
	}
	if g.lost() {
		return fmt.Errorf("%w: segment %s", ErrLeaseLost, g.name)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), stopDeadline)
	defer cancel()
	if err := g.keep.Save(ctx, g.marshal()); err != nil {
		return errors.Join(cause, fmt.Errorf("dlqdump: record where segment %s stopped: %w", g.name, err))
	}
	return cause
}

// finish completes the segment: it is deleted or archived, or, when blocks
// were damaged, moved to quarantine with what was done to it. A released
// segment whose damage that quarantine reported already, and that has
// nothing left, is finished like any other: releasing it says so.
func (g *segRun) finish() error {
	r := g.r
	if g.prog.Damaged > g.reported {
		reason := fmt.Sprintf("%d damaged blocks (first: %s); its %d intact records were delivered (%d) or set aside (%d), as its claim record says",
			g.prog.Damaged, g.prog.Damage, g.prog.Delivered+g.prog.Quarantined+g.prog.Skipped, g.prog.Delivered, g.prog.Quarantined+g.prog.Skipped)
		return g.quarantineWhole("damaged", reason, 0)
	}
	if g.untouched() {
		// A filtered pass that selected none of its records leaves it
		// as it was, rather than copying it whole into a remainder.
		g.prog.Aside = nil
		if g.dry {
			return nil
		}
		if err := g.keep.Claim().Forget(context.WithoutCancel(g.ctx)); err != nil {
			return err
		}
		g.ended = true
		return nil
	}
	if g.dry {
		g.rep.Segments++
		return nil
	}
	if g.prog.Damaged > 0 {
		r.log.Warn("finishing a released segment: its damaged blocks, reported when it was quarantined, cannot be read; its intact records were all delivered or set aside",
			slog.String("segment", g.name), slog.Int("damaged_blocks", g.prog.Damaged), slog.String("damage", g.prog.Damage),
			slog.Uint64("delivered", g.prog.Delivered), slog.Bool("archived", r.c.Archive))
	}
	to := claims.Destination{Delete: !r.c.Archive, Area: sink.AreaArchive}
	if err := g.end(to); err != nil {
		return err
	}
	g.rep.Segments++
	return nil
}

// untouched reports whether the run did nothing to the segment but skip all
// of its records.
func (g *segRun) untouched() bool {
	p := &g.prog
	return p.Delivered == 0 && p.Quarantined == 0 && p.Sides == 0 && p.Damaged == 0 && p.Skipped > 0
}

// end finishes the claim, and counts in the metrics the records the
// segment set aside for quarantine: counted from its progress once it is
// finished, so that work repeated after an interruption is not counted twice.
func (g *segRun) end(to claims.Destination) error {
	// Finish may be repeated: a failure (or a success whose answer was
	// lost) is tried again a few times before the claim is left to expire.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), finishDeadline)
	defer cancel()
	var err error
	for attempt := 1; ; attempt++ {
		err = g.keep.Claim().Finish(ctx, to)
		if err == nil || errors.Is(err, ErrLeaseLost) || attempt >= finishAttempts {
			break
		}
		g.r.log.Warn("finishing a segment failed; retrying", slog.String("segment", g.name), slog.Int("attempt", attempt), slog.Any("error", err))
		if backoff.Sleep(ctx, backoff.FullJitter(finishRetryBase, time.Second, attempt)) != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	g.ended = true
	g.r.countQuarantined(g.prog.Labels)
	return nil
}

// quarantineWhole moves the segment to quarantine with the reason; records
// counts its records when known. Its record keeps the progress.
func (g *segRun) quarantineWhole(label, reason string, records int) error {
	g.rep.QuarantinedSegments++
	g.rep.Quarantined += uint64(records)
	if g.dry {
		g.rep.ByReason["quarantine: "+label] += uint64(max(records, 1))
		return nil
	}
	g.r.log.Warn("quarantining a segment", slog.String("segment", g.name), slog.String("reason", reason))
	if g.prog.Started() && !g.lost() {
		if err := g.save(true); err != nil {
			return err
		}
	}
	if records > 0 {
		if g.prog.Labels == nil {
			g.prog.Labels = map[string]uint64{}
		}
		g.prog.Labels[label] += uint64(records) // counted by end
	}
	return g.end(claims.Destination{Area: sink.AreaQuarantine, Reason: reason})
}

// versionMismatch applies the VersionPolicy to a segment of another version.
func (g *segRun) versionMismatch(v Version) error {
	r := g.r
	reason := fmt.Sprintf("version %s, restorer expects %s", v, r.c.Version)
	var records int
	if f := g.sr.Footer(); f != nil {
		records = int(f.Records)
	}
	switch {
	case g.filtered && r.c.VersionPolicy != VersionKeep:
		// A selective pass moves nothing it did not select: the policy
		// is for a pass over everything.
		g.rep.OtherVersionSegments++
		g.rep.Skipped += uint64(records)
		if !g.dry {
			r.log.Info("a selective pass leaves a segment of another version in place", slog.String("segment", g.name),
				slog.String("reason", reason), slog.Int("records", records))
		}
		return nil
	case r.c.VersionPolicy == VersionDelete:
		g.rep.DeletedSegments++
		if g.dry {
			g.rep.ByReason["delete: version "+v.String()] += uint64(records)
			return nil
		}
		r.log.Warn("deleting a segment of another version", slog.String("segment", g.name), slog.String("reason", reason), slog.Int("records", records))
		r.mw.Fail("version_deleted")
		return g.end(claims.Destination{Delete: true})
	case r.c.VersionPolicy == VersionKeep:
		if g.dry {
			return nil
		}
		r.mu.Lock()
		r.skip[g.name] = leftInPlace{reason: reason}
		r.mu.Unlock()
		r.log.Info("leaving a segment of another version in place", slog.String("segment", g.name), slog.String("reason", reason))
		return nil
	}
	return g.quarantineWhole("version", reason, records)
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
