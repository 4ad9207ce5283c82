package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// Walker reads the records of a store's segments block by block: one block
// in memory at a time.
type Walker struct {
	// Reader is the store.
	Reader sink.Reader
	// Options returns the options a segment is read with (its keys, if
	// any); an error stops the walk. Default: none, no keys.
	Options func(name string) (*segment.ReaderOptions, error)
	// Stop, when set, ends a walk at the next block once done (the command
	// line's first interrupt); the context given to Walk ends I/O at once.
	Stop context.Context
	// Path names a segment in errors. Default AREA/NAME.
	Path func(area sink.Area, name string) string
	// KeyHint, when set, adds to an error about a missing key how to give
	// one.
	KeyHint func(error) error
}

// BlockFunc handles an intact block of a segment.
type BlockFunc func(hdr *segment.Header, b *segment.Block) error

// WalkStats is what walking a segment met.
type WalkStats struct {
	Blocks, Damaged int
	// Skipped is set when the selection's plan ruled the whole segment
	// out (Why says by what), before any block was read; SkippedBlocks
	// counts the blocks of a segment read in part that it ruled out.
	Skipped       bool
	Why           string
	SkippedBlocks int
	// Lost counts the records of damaged blocks, when the footer tells.
	Lost uint64
	// UnknownLost is set when damaged blocks of unknown size were met.
	UnknownLost bool
}

// WalkOpts choose what Walk reads.
type WalkOpts struct {
	// Select, when set, lets Walk skip a segment, or blocks of it, that
	// hold no record it selects, by what the segment's header, footer and
	// summary say (selection.Plan). fn still gets every record of the
	// blocks read: callers match them (Segment gives what Match needs).
	Select *selection.Selection
	// Done, when set, is the restore progress of the segment: Walk skips
	// the blocks of records handled already, and the callers skip the
	// records for which Done.Skip is true.
	Done *Claim
	// From, when not zero, is where to start: the first record at or after
	// it (Walk seeks to its block through the footer's index).
	From uint64
	// Sealed, when set, is called instead of fn for each block of an
	// encrypted segment no identity given unwraps: the block's checksum
	// was verified, its records cannot be read.
	Sealed func(bi segment.BlockInfo) error
	// Opened, when set, is called with the segment's Reader once opened.
	Opened func(sr *segment.Reader)
	// Stream, when set, decodes the blocks of a segment read in order
	// ahead of fn, on the goroutines it says (segment.Stream): a search
	// through many records then uses every core. The blocks fn gets are
	// released once it returns (their records' memory stays valid). Walks
	// that pick blocks by time read them one at a time. Default nil: one
	// block at a time, on the caller's goroutine.
	Stream *segment.StreamOptions
}

// from returns where Walk starts: the first record the progress in o.Done
// did not handle (the position, or the first record set aside before it).
func (o *WalkOpts) from() segment.Position {
	v := o.Done
	if v == nil || v.ProgErr != nil {
		return segment.Position{}
	}
	pos := segment.Position{Offset: v.Prog.Offset, Seq: v.Prog.Seq}
	for _, r := range append(slices.Clip(v.Prog.Aside), v.Prog.Carve...) {
		if r.From < pos.Seq {
			pos = segment.Position{Offset: r.Offset, Seq: r.From}
		}
	}
	return pos
}

func (w *Walker) path(area sink.Area, name string) string {
	if w.Path != nil {
		return w.Path(area, name)
	}
	return area.String() + "/" + name
}

func (w *Walker) stop(ctx context.Context) error {
	if w.Stop != nil {
		if err := w.Stop.Err(); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (w *Walker) hint(err error) error {
	if w.KeyHint != nil {
		return w.KeyHint(err)
	}
	return err
}

// Walk opens a segment and calls fn for every intact block, in order, and
// damage for every damaged part (header, footer, block), each a
// *segment.CorruptError naming the segment and the offset. It stops at the
// first error from fn, I/O or the context.
func (w *Walker) Walk(ctx context.Context, si sink.Info, o WalkOpts, fn BlockFunc, damage func(error)) (WalkStats, error) {
	var st WalkStats
	f, err := w.Reader.Open(ctx, si.Area, si.Name)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", w.path(si.Area, si.Name), err)
	}
	defer f.Close()
	ro := &segment.ReaderOptions{Name: si.Name}
	if w.Options != nil {
		if ro, err = w.Options(si.Name); err != nil {
			return st, err
		}
	}
	sr, err := segment.NewReaderContext(ctx, f, f.Size(), ro)
	if errors.Is(err, segment.ErrNoKey) && o.Sealed != nil {
		// No identity given unwraps its key: checksums only.
		ro.Keys = nil
		sr, err = segment.NewReader(f, f.Size(), ro)
	}
	if err != nil {
		if IsCorrupt(err) {
			st.Damaged++
			st.UnknownLost = true
			damage(err)
			return st, nil
		}
		return st, w.hint(err)
	}
	if o.Opened != nil {
		o.Opened(sr)
	}
	hdr := sr.Header()
	if sr.KeyError() != nil {
		if o.Sealed == nil {
			return st, w.hint(sr.KeyError())
		}
		plan := w.plan(si, sr, o.Select, &st)
		if st.Skipped {
			return st, nil
		}
		return w.walkSealed(ctx, sr, &st, o, damage, sr.Footer(), plan.Blocks)
	}
	ft := sr.Footer()
	if ft == nil {
		damage(sr.FooterError())
	}
	plan := w.plan(si, sr, o.Select, &st)
	if st.Skipped {
		return st, nil
	}
	// Blocks the plan rules out are not read, one block at a time; when
	// it keeps most of them, reading them all in a stream is faster and
	// those it rules out are only not handed to fn.
	planned := plan.Blocks != nil && (o.Stream == nil || 2*plan.Read <= len(plan.Blocks))
	if plan.Blocks != nil && !planned {
		inner := fn
		fn = func(hdr *segment.Header, b *segment.Block) error {
			if !wanted(ft, plan.Blocks, b.Info()) {
				st.SkippedBlocks++
				return nil
			}
			return inner(hdr, b)
		}
	}
	from := o.from()
	var b segment.Block
	handle := func(err error) error {
		if err == nil {
			st.Blocks++
			return fn(&hdr, &b)
		}
		if !IsCorrupt(err) {
			return err
		}
		st.Damaged++
		countLost(&st, ft, err)
		damage(err)
		return nil
	}
	if ft != nil && o.From > from.Seq && !planned {
		// Start at the block of the first record wanted.
		for _, bi := range ft.Blocks {
			if bi.FirstSeq+uint64(bi.Count) > o.From {
				from = segment.Position{Offset: bi.Offset, Seq: bi.FirstSeq}
				break
			}
			from = segment.Position{Offset: sr.Size(), Seq: ft.Records} // past the last block
		}
		if from.Seq >= ft.Records {
			return st, nil
		}
	}
	if planned {
		// Read only the blocks the plan keeps, from the first record
		// wanted.
		for i, bi := range ft.Blocks {
			if err := w.stop(ctx); err != nil {
				return st, err
			}
			end := bi.FirstSeq + uint64(bi.Count)
			if end <= from.Seq || end <= o.From {
				continue
			}
			if !plan.Blocks[i] {
				st.SkippedBlocks++
				continue
			}
			if err := sr.Seek(segment.Position{Offset: bi.Offset, Seq: max(bi.FirstSeq, from.Seq)}); err != nil {
				return st, err
			}
			if err := handle(sr.ReadBlock(&b)); err != nil {
				return st, err
			}
		}
		return st, nil
	}
	if from != (segment.Position{}) {
		if err := sr.Seek(from); err != nil {
			// A checkpoint outside the segment (the Restorer
			// quarantines such a segment): read it all.
			_ = sr.Seek(segment.Position{})
		}
	}
	if o.Stream != nil {
		return w.stream(ctx, sr, o, &st, func(blk *segment.Block) error {
			st.Blocks++
			return fn(&hdr, blk)
		}, handle)
	}
	for {
		if err := w.stop(ctx); err != nil {
			return st, err
		}
		err := sr.ReadBlock(&b)
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if o.From > 0 && err == nil && b.Info().FirstSeq+uint64(b.Info().Count) <= o.From {
			continue // an unsealed segment: read up to the first record wanted
		}
		if err := handle(err); err != nil {
			return st, err
		}
	}
}

// plan plans the reading of a segment for sel, reading its summary (only
// for a selection that is not of every record): st.Skipped says that none
// of it is to be read.
func (w *Walker) plan(si sink.Info, sr *segment.Reader, sel *selection.Selection, st *WalkStats) selection.Plan {
	if sel.IsAll() {
		return selection.Plan{}
	}
	hdr := sr.Header()
	seg := &selection.Segment{Area: si.Area, Name: si.Name, Header: &hdr, Footer: sr.Footer()}
	seg.Summary, _ = sr.Summary() // none, damaged or sealed: may match
	p := sel.Plan(seg)
	st.Skipped, st.Why = p.Skip, p.Why
	return p
}

// SegmentOf returns what a selection matches a record of segment si with
// header hdr against.
func SegmentOf(si sink.Info, hdr *segment.Header) *selection.Segment {
	return &selection.Segment{Area: si.Area, Name: si.Name, Header: hdr}
}

// Keep returns whether a record of segment si (header hdr) is one a
// reader counts: its restore progress cv (nil: none) did not handle it,
// and sel selects it.
func Keep(si sink.Info, hdr *segment.Header, cv *Claim, sel *selection.Selection) func(*segment.Record) bool {
	seg := SegmentOf(si, hdr)
	return func(rec *segment.Record) bool { return !cv.Skip(rec.Seq) && sel.Match(seg, rec) }
}

// countLost counts the records of a damaged block in st, when the footer
// ft (nil when unsealed) tells how many it held.
func countLost(st *WalkStats, ft *segment.Footer, err error) {
	if ce := (*segment.CorruptError)(nil); errors.As(err, &ce) && ft != nil && ce.Block >= 0 && ce.Block < len(ft.Blocks) && ft.Blocks[ce.Block].Offset == ce.Offset {
		st.Lost += uint64(ft.Blocks[ce.Block].Count)
	} else {
		st.UnknownLost = true
	}
}

// walkSealed verifies the blocks of an encrypted segment opened without its
// key: checksums and places only. ft is its footer, nil when unsealed;
// want, when set, the blocks of its index a plan keeps.
func (w *Walker) walkSealed(ctx context.Context, sr *segment.Reader, st *WalkStats, o WalkOpts, damage func(error), ft *segment.Footer, want []bool) (WalkStats, error) {
	if ft == nil {
		damage(sr.FooterError())
	}
	for {
		if err := w.stop(ctx); err != nil {
			return *st, err
		}
		bi, err := sr.VerifyBlock()
		if errors.Is(err, io.EOF) {
			return *st, nil
		}
		if err == nil {
			st.Blocks++
			if bi.FirstSeq+uint64(bi.Count) <= o.From {
				continue
			}
			if want != nil && !wanted(ft, want, bi) {
				st.SkippedBlocks++
				continue
			}
			if err := o.Sealed(bi); err != nil {
				return *st, err
			}
			continue
		}
		if !IsCorrupt(err) {
			return *st, err
		}
		st.Damaged++
		countLost(st, ft, err)
		damage(err)
	}
}

// wanted reports whether the plan keeps block bi of the footer ft.
func wanted(ft *segment.Footer, want []bool, bi segment.BlockInfo) bool {
	i := sort.Search(len(ft.Blocks), func(i int) bool { return ft.Blocks[i].Offset >= bi.Offset })
	return i == len(ft.Blocks) || ft.Blocks[i].Offset != bi.Offset || want[i]
}

// stream reads the rest of a segment through a segment.Stream: block
// handles each intact block, handle each error that is damage.
func (w *Walker) stream(ctx context.Context, sr *segment.Reader, o WalkOpts, st *WalkStats, block func(*segment.Block) error, handle func(error) error) (WalkStats, error) {
	s := segment.NewStream(sr, o.Stream)
	defer s.Close()
	for {
		if err := w.stop(ctx); err != nil {
			return *st, err
		}
		blk, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return *st, nil
		}
		if err != nil {
			if err := handle(err); err != nil {
				return *st, err
			}
			continue
		}
		if o.From > 0 && blk.Info().FirstSeq+uint64(blk.Info().Count) <= o.From {
			blk.Release()
			continue // an unsealed segment: read up to the first record wanted
		}
		err = block(blk)
		blk.Release()
		if err != nil {
			return *st, err
		}
	}
}
