package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
)

// summary describes one segment: what its header and footer say, or what a
// scan of its blocks found when it is unsealed.
type summary struct {
	info    dlqdump.SegmentInfo
	hdr     segment.Header
	read    bool // the header was read
	sealed  bool
	blocks  int
	records uint64
	raw     uint64
	minT    time.Time
	maxT    time.Time
	// damage lists what is wrong: an unreadable header, a missing or
	// damaged footer, damaged blocks found by the scan of an unsealed
	// segment. Each error names the segment and the offset.
	damage []error
	// err is an error that is not damage (I/O, permissions).
	err error
}

// state returns ready, claimed, quarantined or archived.
func (s *summary) state(now time.Time) string {
	switch s.info.Area {
	case dlqdump.AreaQuarantine:
		return "quarantined"
	case dlqdump.AreaArchive:
		return "archived"
	}
	if c := s.info.Claim; c != nil && c.Expires.After(now) {
		return "claimed"
	}
	return "ready"
}

// ratio returns raw bytes over stored bytes (the segment's size), 0 when
// unknown.
func (s *summary) ratio() float64 {
	if s.info.Size <= 0 || s.raw == 0 {
		return 0
	}
	return float64(s.raw) / float64(s.info.Size)
}

// summarize reads a segment's header and footer; an unsealed segment is
// scanned block by block.
func (a *app) summarize(l *location, si dlqdump.SegmentInfo) *summary {
	s := &summary{info: si}
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		s.err = fmt.Errorf("open %s: %w", l.segPath(si.Area, si.Name), err)
		return s
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
	if err != nil {
		if isCorrupt(err) {
			s.damage = append(s.damage, err)
		} else {
			s.err = err
		}
		return s
	}
	s.read, s.hdr, s.sealed = true, sr.Header(), sr.Sealed()
	if ft := sr.Footer(); ft != nil {
		s.blocks, s.records, s.raw = len(ft.Blocks), ft.Records, ft.RawBytes
		s.minT, s.maxT = ft.MinTime, ft.MaxTime
		return s
	}
	s.damage = append(s.damage, sr.FooterError())
	var minT, maxT int64
	for {
		if err := a.ctx.Err(); err != nil {
			s.err = err
			return s
		}
		bi, err := sr.NextBlock()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !isCorrupt(err) {
				s.err = err
				return s
			}
			s.damage = append(s.damage, err)
			continue
		}
		if s.blocks == 0 {
			minT, maxT = bi.MinTime, bi.MaxTime
		}
		minT, maxT = min(minT, bi.MinTime), max(maxT, bi.MaxTime)
		s.blocks++
		s.records += uint64(bi.Count)
		s.raw += uint64(bi.RawLen)
	}
	if s.records > 0 {
		s.minT, s.maxT = time.Unix(0, minT).UTC(), time.Unix(0, maxT).UTC()
	}
	return s
}

// isCorrupt reports whether err is damage (a *segment.CorruptError).
func isCorrupt(err error) bool {
	var ce *segment.CorruptError
	return errors.As(err, &ce)
}

// blockFunc handles an intact block of a segment.
type blockFunc func(hdr *segment.Header, b *segment.Block) error

// walkStats is what walking a segment met.
type walkStats struct {
	blocks, damaged int
	// lost counts the records of damaged blocks, when the footer tells.
	lost uint64
	// unknownLost is set when damaged blocks of unknown size were met.
	unknownLost bool
}

// checkpointOf returns where restoring a ready segment resumes: the records
// before it were delivered or quarantined. Zero when not partly restored.
func checkpointOf(si dlqdump.SegmentInfo) segment.Position {
	if si.Area != dlqdump.AreaReady || si.Claim == nil {
		return segment.Position{}
	}
	return si.Claim.Checkpoint.Position
}

// walkOpts choose what walk reads.
type walkOpts struct {
	// flt, when it bounds times, lets walk skip the blocks of a sealed
	// segment outside them.
	flt *filter
	// from skips the records before this position (a restore checkpoint).
	from segment.Position
}

// walk opens a segment and calls fn for every intact block, in order, and
// damage for every damaged part (header, footer, block), each a
// *segment.CorruptError naming the segment and the offset. It stops at the
// first error from fn, I/O or the context.
func (a *app) walk(l *location, si dlqdump.SegmentInfo, o walkOpts, fn blockFunc, damage func(error)) (walkStats, error) {
	var st walkStats
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", l.segPath(si.Area, si.Name), err)
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
	if err != nil {
		if isCorrupt(err) {
			st.damaged++
			st.unknownLost = true
			damage(err)
			return st, nil
		}
		return st, err
	}
	hdr := sr.Header()
	ft := sr.Footer()
	if ft == nil {
		damage(sr.FooterError())
	}
	flt := o.flt
	timed := ft != nil && flt != nil && flt.timed()
	if timed && (len(ft.Blocks) == 0 || !flt.overlaps(ft.MinTime.UnixNano(), ft.MaxTime.UnixNano())) {
		return st, nil
	}
	var b segment.Block
	handle := func(err error) error {
		if err == nil {
			st.blocks++
			return fn(&hdr, &b)
		}
		if !isCorrupt(err) {
			return err
		}
		st.damaged++
		if ce := (*segment.CorruptError)(nil); errors.As(err, &ce) && ft != nil && ce.Block >= 0 && ce.Block < len(ft.Blocks) && ft.Blocks[ce.Block].Offset == ce.Offset {
			st.lost += uint64(ft.Blocks[ce.Block].Count)
		} else {
			st.unknownLost = true
		}
		damage(err)
		return nil
	}
	if timed {
		// Read only the blocks whose time range meets the filter.
		for _, bi := range ft.Blocks {
			if err := a.soft.Err(); err != nil {
				return st, err
			}
			if !flt.overlaps(bi.MinTime, bi.MaxTime) || bi.FirstSeq+uint64(bi.Count) <= o.from.Seq {
				continue
			}
			if err := sr.Seek(segment.Position{Offset: bi.Offset, Seq: max(bi.FirstSeq, o.from.Seq)}); err != nil {
				return st, err
			}
			if err := handle(sr.ReadBlock(&b)); err != nil {
				return st, err
			}
		}
		return st, nil
	}
	if o.from != (segment.Position{}) {
		if err := sr.Seek(o.from); err != nil {
			// Like the Restorer: a checkpoint outside the segment
			// means reading it from the start.
			_ = sr.Seek(segment.Position{})
		}
	}
	for {
		if err := a.soft.Err(); err != nil {
			return st, err
		}
		err := sr.ReadBlock(&b)
		if errors.Is(err, io.EOF) {
			return st, nil
		}
		if err := handle(err); err != nil {
			return st, err
		}
	}
}
