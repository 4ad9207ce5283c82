package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// summary describes one segment: what its header and footer say, or what a
// scan of its blocks found when it is unsealed.
type summary struct {
	info    sink.Info
	claim   *claimView // the segment's record, nil if none
	hdr     segment.Header
	read    bool // the header was read
	enc     encryption
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

// state returns ready, claimed (a restorer holds its claim, or held it and
// has not been seen gone), quarantined or archived.
func (s *summary) state() string {
	return segState(s.info, s.claim)
}

func segState(si sink.Info, c *claimView) string {
	switch si.Area {
	case sink.AreaQuarantine:
		return "quarantined"
	case sink.AreaArchive:
		return "archived"
	}
	if c != nil && c.rec.Held() {
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
func (a *app) summarize(l *location, si sink.Info, claim *claimView) *summary {
	s := &summary{info: si, claim: claim}
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		s.err = fmt.Errorf("open %s: %w", l.segPath(si.Area, si.Name), err)
		return s
	}
	defer f.Close()
	// Without keys: the header and footer are enough, and the blocks of
	// an unsealed encrypted segment are checked without its key.
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
	s.enc = encryptionOf(sr)
	next := sr.NextBlock
	if sr.KeyError() != nil {
		next = sr.VerifyBlock
	}
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
		bi, err := next()
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

// isBlockDamage reports whether err is the damage of a block, not of the
// header or the footer: what ls, stat and verify count as damaged blocks.
func isBlockDamage(err error) bool {
	var ce *segment.CorruptError
	return errors.As(err, &ce) && ce.Block >= 0
}

// countBlockDamage counts the damaged blocks among a segment's damage.
func countBlockDamage(damage []error) int {
	n := 0
	for _, err := range damage {
		if isBlockDamage(err) {
			n++
		}
	}
	return n
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

// walkOpts choose what walk reads.
type walkOpts struct {
	// flt, when it bounds times, lets walk skip the blocks of a sealed
	// segment outside them.
	flt *filter
	// done, when set, is the restore progress of the segment: walk skips
	// the blocks of records handled already, and the callers skip the
	// records for which done.skip is true.
	done *claimView
	// sealed, when set, is called instead of fn for each block of an
	// encrypted segment no identity given unwraps: the block's checksum
	// was verified, its records cannot be read (verify without a key).
	sealed func(bi segment.BlockInfo) error
	// opened, when set, is called with the segment's Reader once opened.
	opened func(sr *segment.Reader)
}

// from returns where walk starts: the first record the progress in o.done
// did not handle (the position, or the first record set aside before it).
func (o *walkOpts) from() segment.Position {
	v := o.done
	if v == nil || v.progErr != nil {
		return segment.Position{}
	}
	pos := segment.Position{Offset: v.prog.Offset, Seq: v.prog.Seq}
	for _, r := range v.prog.Aside {
		if r.From < pos.Seq {
			pos = segment.Position{Offset: r.Offset, Seq: r.From}
		}
	}
	return pos
}

// walk opens a segment and calls fn for every intact block, in order, and
// damage for every damaged part (header, footer, block), each a
// *segment.CorruptError naming the segment and the offset. It stops at the
// first error from fn, I/O or the context.
func (a *app) walk(l *location, si sink.Info, o walkOpts, fn blockFunc, damage func(error)) (walkStats, error) {
	var st walkStats
	f, err := l.reader.Open(a.ctx, si.Area, si.Name)
	if err != nil {
		return st, fmt.Errorf("open %s: %w", l.segPath(si.Area, si.Name), err)
	}
	defer f.Close()
	ro, err := a.readerOptions(si.Name)
	if err != nil {
		return st, err
	}
	sr, err := segment.NewReaderContext(a.ctx, f, f.Size(), ro)
	if errors.Is(err, segment.ErrNoKey) && o.sealed != nil {
		// No identity given unwraps its key: checksums only.
		ro.Keys = nil
		sr, err = segment.NewReader(f, f.Size(), ro)
	}
	if err != nil {
		if isCorrupt(err) {
			st.damaged++
			st.unknownLost = true
			damage(err)
			return st, nil
		}
		return st, keyHint(err)
	}
	if o.opened != nil {
		o.opened(sr)
	}
	hdr := sr.Header()
	if sr.KeyError() != nil {
		if o.sealed == nil {
			return st, keyHint(sr.KeyError())
		}
		return a.walkSealed(sr, &st, o.sealed, damage, sr.Footer())
	}
	ft := sr.Footer()
	if ft == nil {
		damage(sr.FooterError())
	}
	flt := o.flt
	timed := ft != nil && flt != nil && flt.timed()
	if timed && (len(ft.Blocks) == 0 || !flt.overlaps(ft.MinTime.UnixNano(), ft.MaxTime.UnixNano())) {
		return st, nil
	}
	from := o.from()
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
			if !flt.overlaps(bi.MinTime, bi.MaxTime) || bi.FirstSeq+uint64(bi.Count) <= from.Seq {
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

// walkSealed verifies the blocks of an encrypted segment opened without its
// key: checksums and places only. ft is its footer, nil when unsealed.
func (a *app) walkSealed(sr *segment.Reader, st *walkStats, fn func(segment.BlockInfo) error, damage func(error), ft *segment.Footer) (walkStats, error) {
	if ft == nil {
		damage(sr.FooterError())
	}
	for {
		if err := a.soft.Err(); err != nil {
			return *st, err
		}
		bi, err := sr.VerifyBlock()
		if errors.Is(err, io.EOF) {
			return *st, nil
		}
		if err == nil {
			st.blocks++
			if err := fn(bi); err != nil {
				return *st, err
			}
			continue
		}
		if !isCorrupt(err) {
			return *st, err
		}
		st.damaged++
		if ce := (*segment.CorruptError)(nil); errors.As(err, &ce) && ft != nil && ce.Block >= 0 && ce.Block < len(ft.Blocks) && ft.Blocks[ce.Block].Offset == ce.Offset {
			st.lost += uint64(ft.Blocks[ce.Block].Count)
		} else {
			st.unknownLost = true
		}
		damage(err)
	}
}

// encryption says whether a segment is encrypted and for which kinds of
// recipient its data key is wrapped, read from its header without a key.
type encryption struct {
	on    bool
	kinds []string // one per recipient: "X25519", "ssh-ed25519", "dlqdump-kms", ...
}

func encryptionOf(sr *segment.Reader) encryption {
	if !sr.Header().Encrypted {
		return encryption{}
	}
	kinds, _ := envelope.Stanzas(sr.WrappedKey()) // malformed: unwrapping says so
	return encryption{on: true, kinds: kinds}
}

// String describes the encryption in a few words: "no", or the kinds of
// recipient with their counts, e.g. "X25519×2,dlqdump-kms".
func (e encryption) String() string {
	if !e.on {
		return "no"
	}
	if len(e.kinds) == 0 {
		return "yes"
	}
	var order []string
	n := map[string]int{}
	for _, k := range e.kinds {
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	for i, k := range order {
		if n[k] > 1 {
			order[i] = fmt.Sprintf("%s×%d", k, n[k])
		}
	}
	return strings.Join(order, ",")
}
