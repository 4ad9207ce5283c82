package selection

import (
	"slices"
	"strings"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/signature"
	"github.com/dlqdump/dlqdump/sink"
)

// What is known of a segment decides, before its records are read, whether
// a selection can select any of them: a verdict of no, some may, or all
// do. Areas, names and record IDs are exact; time ranges come from the
// footer (the segment's and each block's); header values and payload bytes
// from the summary, which only ever says "no" or "may". A "not" turns "no"
// into "all" and back, so "not" of what only a summary knows is "may".

type verdict uint8

const (
	vNo verdict = iota
	vMaybe
	vAll
)

func not(v verdict) verdict {
	switch v {
	case vNo:
		return vAll
	case vAll:
		return vNo
	}
	return vMaybe
}

// Plan says how to read a segment for a selection: not at all (Skip, with
// the part of the selection that decided it), or which blocks.
type Plan struct {
	// Skip: no record of the segment can be selected.
	Skip bool
	// Why names the part of the selection that skips it, and with what
	// it knows (e.g. `reason = "failed" (summary)`), when Skip.
	Why string
	// Blocks, when not nil, says for each block of the footer's index
	// whether it may hold a selected record; nil: every block may (or
	// the footer is not known).
	Blocks []bool
	// Read counts the blocks to read, when Blocks is not nil.
	Read int
}

// Plan decides what of seg to read for the selection, from what seg tells.
func (s *Selection) Plan(seg *Segment) Plan {
	if s.IsAll() {
		return Plan{}
	}
	if v, why := s.segmentVerdict(seg); v == vNo {
		return Plan{Skip: true, Why: why}
	}
	ft := seg.Footer
	if ft == nil || len(ft.Blocks) == 0 {
		return Plan{}
	}
	p := Plan{Blocks: make([]bool, len(ft.Blocks))}
	for i := range ft.Blocks {
		if blockVerdict(s.root, seg, i, s.decode != nil) != vNo {
			p.Blocks[i] = true
			p.Read++
		}
	}
	if p.Read == 0 {
		return Plan{Skip: true, Why: "every block (" + s.String() + ")"}
	}
	if p.Read == len(p.Blocks) {
		p.Blocks, p.Read = nil, 0
	}
	return p
}

// SkipSegment reports whether no record of seg can be selected.
func (s *Selection) SkipSegment(seg *Segment) bool {
	if s.IsAll() {
		return false
	}
	v, _ := s.segmentVerdict(seg)
	return v == vNo
}

// SelectsAll reports whether every record of seg is selected, by what is
// known of it without reading a record (its area and name, its footer's time
// range; a summary never says "all"). False means "some may not be".
func (s *Selection) SelectsAll(seg *Segment) bool {
	if s.IsAll() {
		return true
	}
	v, _ := s.segmentVerdict(seg)
	return v == vAll
}

// segmentVerdict returns the segment's verdict and, when it is no, the part
// that decided it.
func (s *Selection) segmentVerdict(seg *Segment) (verdict, string) {
	if a, ok := s.root.(*nAnd); ok {
		v := vAll
		for _, x := range a.xs {
			switch segVerdict(x, seg, s.decode != nil) {
			case vNo:
				return vNo, printNode(x, 0) + knownBy(x, seg)
			case vMaybe:
				v = vMaybe
			}
		}
		return v, ""
	}
	v := segVerdict(s.root, seg, s.decode != nil)
	if v == vNo {
		return v, printNode(s.root, 0) + knownBy(s.root, seg)
	}
	return v, ""
}

// knownBy says what a segment's verdict on n came from.
func knownBy(n node, seg *Segment) string {
	switch {
	case walk(n, func(a *atom) bool { return a.field == fHeader || a.field == fPayload || a.field == fJSON }) && seg.Summary != nil:
		return " (summary)"
	case walk(n, func(a *atom) bool { return a.field == fTime }):
		return " (footer)"
	}
	return ""
}

func segVerdict(n node, seg *Segment, dec bool) verdict {
	return eval(n, func(a *atom) verdict { return a.segment(seg, dec) })
}

func blockVerdict(n node, seg *Segment, i int, dec bool) verdict {
	return eval(n, func(a *atom) verdict { return a.block(seg, i, dec) })
}

// eval combines the verdicts leaf gives the atoms of n.
func eval(n node, leaf func(*atom) verdict) verdict {
	switch n := n.(type) {
	case nAll:
		return vAll
	case *nAnd:
		v := vAll
		for _, x := range n.xs {
			switch eval(x, leaf) {
			case vNo:
				return vNo
			case vMaybe:
				v = vMaybe
			}
		}
		return v
	case *nOr:
		v := vNo
		for _, x := range n.xs {
			switch eval(x, leaf) {
			case vAll:
				return vAll
			case vMaybe:
				v = vMaybe
			}
		}
		return v
	case *nNot:
		return not(eval(n.x, leaf))
	case *atom:
		return leaf(n)
	}
	return vMaybe
}

// timeVerdict compares a time atom with records between lo and hi.
func (a *atom) timeVerdict(lo, hi int64) verdict {
	t := a.t.UnixNano()
	var first, last bool // the first and the last record match
	switch a.op {
	case opLt:
		first, last = lo < t, hi < t
	case opLe:
		first, last = lo <= t, hi <= t
	case opGt:
		first, last = lo > t, hi > t
	default:
		first, last = lo >= t, hi >= t
	}
	switch {
	case first && last:
		return vAll
	case !first && !last:
		return vNo
	}
	return vMaybe
}

// segment is the atom's verdict on a segment.
func (a *atom) segment(seg *Segment, dec bool) verdict {
	sum := seg.Summary
	switch a.field {
	case fTime:
		if ft := seg.Footer; ft != nil && ft.Records > 0 {
			return a.timeVerdict(ft.MinTime.UnixNano(), ft.MaxTime.UnixNano())
		}
	case fArea:
		return yesNo(slices.Contains(a.areas, seg.Area))
	case fSegment:
		if seg.Name != "" {
			return yesNo(slices.Contains(a.vals, seg.Name))
		}
	case fID:
		if seg.Header == nil {
			return vMaybe
		}
		o := seg.Header.Origin()
		for _, id := range a.ids {
			if id.Origin == o && (seg.Footer == nil || id.Seq < seg.Footer.Records) || sum.MayHave(segment.RecordIDHeader, id.String()) {
				return vMaybe
			}
		}
		return vNo
	case fHeader:
		switch a.op {
		case opHas:
			if !sum.MayHaveKey(a.key) {
				return vNo
			}
		case opContains:
			vals, exact, present := sum.Values(a.key)
			if !present || exact && !slices.ContainsFunc(vals, func(v string) bool { return strings.Contains(v, a.vals[0]) }) {
				return vNo
			}
		case opLike:
			vals, exact, present := sum.Values(a.key)
			if !present || exact && !slices.ContainsFunc(vals, func(v string) bool { return signature.Of(v) == a.vals[0] }) {
				return vNo
			}
		default:
			if !slices.ContainsFunc(a.vals, func(v string) bool { return sum.MayHave(a.key, v) }) {
				return vNo
			}
		}
	case fPayload, fJSON:
		if ft := seg.Footer; sum != nil && ft != nil {
			for i := range ft.Blocks {
				if a.block(seg, i, dec) != vNo {
					return vMaybe
				}
			}
			return vNo
		}
	}
	return vMaybe
}

// block is the atom's verdict on block i of the segment's footer.
func (a *atom) block(seg *Segment, i int, dec bool) verdict {
	sum := seg.Summary
	switch a.field {
	case fTime:
		if bi := seg.Footer.Blocks[i]; bi.Count > 0 {
			return a.timeVerdict(bi.MinTime, bi.MaxTime)
		}
		return vMaybe
	case fArea, fSegment:
		return a.segment(seg, dec)
	case fID:
		if seg.Header == nil {
			return vMaybe
		}
		bi := seg.Footer.Blocks[i]
		o := seg.Header.Origin()
		for _, id := range a.ids {
			if id.Origin == o && id.Seq >= bi.FirstSeq && id.Seq < bi.FirstSeq+uint64(bi.Count) || sum.BlockMayHave(i, segment.RecordIDHeader, id.String()) {
				return vMaybe
			}
		}
		return vNo
	case fHeader:
		switch a.op {
		case opHas:
			return maybeNo(sum.BlockMayHaveKey(i, a.key))
		case opContains:
			return a.segment(seg, dec)
		case opLike:
			if a.segment(seg, dec) == vNo {
				return vNo
			}
			return maybeNo(sum.BlockMayHaveKey(i, a.key))
		}
		return maybeNo(slices.ContainsFunc(a.vals, func(v string) bool { return sum.BlockMayHave(i, a.key, v) }))
	case fPayload:
		return maybeNo(sum.BlockMayContain(i, []byte(a.vals[0]), false))
	case fJSON:
		if dec || a.op == opHas || a.op == opContains && len(a.vals[0]) < 3 {
			return vMaybe
		}
		// A JSON value's text is in a payload that holds it, unless
		// escaped (the summary knows which blocks hold escapes); not
		// so in payloads decoded into JSON (protobuf: dec).
		return maybeNo(slices.ContainsFunc(a.vals, func(v string) bool { return sum.BlockMayContain(i, []byte(v), true) }))
	}
	return vMaybe
}

func yesNo(b bool) verdict {
	if b {
		return vAll
	}
	return vNo
}

func maybeNo(b bool) verdict {
	if b {
		return vMaybe
	}
	return vNo
}

// Areas returns the areas of areas where the selection may select a record,
// in the order given: those "area" allows.
func (s *Selection) Areas(areas ...sink.Area) []sink.Area {
	var out []sink.Area
	for _, a := range areas {
		if !s.SkipSegment(&Segment{Area: a}) {
			out = append(out, a)
		}
	}
	return out
}

// NamesArea reports whether the selection says which areas it selects from
// ("area = ..."), so that a command's default area does not apply.
func (s *Selection) NamesArea() bool {
	return s != nil && walk(s.root, func(a *atom) bool { return a.field == fArea })
}

// NamesSegment reports whether the selection uses the "segment" field
// anywhere: which records it selects depends on the name of the segment
// holding them (a record copied into another segment may no longer be
// selected).
func (s *Selection) NamesSegment() bool {
	return s != nil && walk(s.root, func(a *atom) bool { return a.field == fSegment })
}

// Segments returns the segment names the selection is restricted to, when
// it is ("segment = NAME", or "in", in every branch that can match): a
// command then reads those segments without listing the store. ok is false
// when any segment may hold a selected record.
func (s *Selection) Segments() (names []string, ok bool) {
	if s == nil {
		return nil, false
	}
	set, ok := segmentsOf(s.root)
	if !ok {
		return nil, false
	}
	slices.Sort(set)
	return slices.Compact(set), true
}

func segmentsOf(n node) ([]string, bool) {
	switch n := n.(type) {
	case *atom:
		if n.field == fSegment {
			return slices.Clone(n.vals), true
		}
	case *nAnd:
		var set []string
		found := false
		for _, x := range n.xs {
			if xs, ok := segmentsOf(x); ok {
				if !found {
					set, found = xs, true
				} else {
					set = slices.DeleteFunc(set, func(v string) bool { return !slices.Contains(xs, v) })
				}
			}
		}
		return set, found
	case *nOr:
		var set []string
		for _, x := range n.xs {
			xs, ok := segmentsOf(x)
			if !ok {
				return nil, false
			}
			set = append(set, xs...)
		}
		return set, true
	}
	return nil, false
}
