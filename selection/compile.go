package selection

import (
	"bytes"
	"slices"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/signature"
	"github.com/dlqdump/dlqdump/sink"
)

// Selection is a compiled expression: it matches records (Match) and plans
// the reading of segments (Plan). The zero Selection, like a nil one and
// the empty expression, selects every record. It is safe for concurrent
// use.
type Selection struct {
	root   node
	match  matcher // nil: every record
	decode func([]byte) ([]byte, bool)
}

// Segment is what a selection knows of a segment: where it is and, once
// read, its header, footer and summary. Match needs Area, Name and Header;
// Plan uses whatever is set (a nil Header, Footer or Summary means "not
// known": what depends on it may match).
type Segment struct {
	Area    sink.Area
	Name    string // "" when not known
	Header  *segment.Header
	Footer  *segment.Footer
	Summary *segment.Summary
}

// matcher tells whether a record of a segment matches.
type matcher func(seg *Segment, rec *segment.Record) bool

func newSelection(root node, decode func([]byte) ([]byte, bool)) *Selection {
	s := &Selection{root: root, decode: decode}
	if _, all := root.(nAll); !all {
		s.match = s.compile(root)
	}
	return s
}

// All returns a selection of every record.
func All() *Selection { return &Selection{root: nAll{}} }

// IsAll reports whether the selection selects every record (a nil one
// does).
func (s *Selection) IsAll() bool {
	if s == nil || s.root == nil {
		return true
	}
	_, all := s.root.(nAll)
	return all
}

// Match reports whether rec, a record of seg, is selected. seg.Header is
// needed by "id" (a nil Header matches no ID).
func (s *Selection) Match(seg *Segment, rec *segment.Record) bool {
	if s == nil || s.match == nil {
		return true
	}
	return s.match(seg, rec)
}

// compile turns a tree into a matcher.
func (s *Selection) compile(n node) matcher {
	switch n := n.(type) {
	case nAll:
		return func(*Segment, *segment.Record) bool { return true }
	case *nAnd:
		ms := make([]matcher, len(n.xs))
		for i, x := range n.xs {
			ms[i] = s.compile(x)
		}
		// Cheap tests first: headers and times before payloads and
		// JSON.
		order := make([]int, len(n.xs))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cost(n.xs[a]) - cost(n.xs[b]) })
		sorted := make([]matcher, len(ms))
		for i, j := range order {
			sorted[i] = ms[j]
		}
		return func(seg *Segment, rec *segment.Record) bool {
			for _, m := range sorted {
				if !m(seg, rec) {
					return false
				}
			}
			return true
		}
	case *nOr:
		ms := make([]matcher, len(n.xs))
		for i, x := range n.xs {
			ms[i] = s.compile(x)
		}
		return func(seg *Segment, rec *segment.Record) bool {
			for _, m := range ms {
				if m(seg, rec) {
					return true
				}
			}
			return false
		}
	case *nNot:
		m := s.compile(n.x)
		return func(seg *Segment, rec *segment.Record) bool { return !m(seg, rec) }
	case *atom:
		return s.compileAtom(n)
	}
	panic("selection: unknown node")
}

// cost ranks a node by what matching it takes.
func cost(n node) int {
	switch n := n.(type) {
	case *atom:
		switch n.field {
		case fArea, fSegment, fTime:
			return 0
		case fHeader, fID:
			return 1
		case fPayload:
			return 2
		}
		return 3
	case *nNot:
		return cost(n.x)
	}
	return 3
}

func (s *Selection) compileAtom(a *atom) matcher {
	switch a.field {
	case fTime:
		t := a.t.UnixNano()
		switch a.op {
		case opLt:
			return func(_ *Segment, r *segment.Record) bool { return r.Time < t }
		case opLe:
			return func(_ *Segment, r *segment.Record) bool { return r.Time <= t }
		case opGt:
			return func(_ *Segment, r *segment.Record) bool { return r.Time > t }
		default:
			return func(_ *Segment, r *segment.Record) bool { return r.Time >= t }
		}
	case fID:
		ids := a.ids
		return func(seg *Segment, r *segment.Record) bool {
			if seg == nil || seg.Header == nil {
				return false
			}
			return slices.Contains(ids, seg.Header.RecordID(r))
		}
	case fArea:
		areas := a.areas
		return func(seg *Segment, _ *segment.Record) bool { return seg != nil && slices.Contains(areas, seg.Area) }
	case fSegment:
		names := a.vals
		return func(seg *Segment, _ *segment.Record) bool { return seg != nil && slices.Contains(names, seg.Name) }
	case fPayload:
		text := []byte(a.vals[0])
		return func(_ *Segment, r *segment.Record) bool { return bytes.Contains(r.Payload, text) }
	case fHeader:
		key := a.key
		switch a.op {
		case opHas:
			return func(_ *Segment, r *segment.Record) bool { _, ok := r.Headers.Lookup(key); return ok }
		case opContains:
			text := []byte(a.vals[0])
			return func(_ *Segment, r *segment.Record) bool {
				v, ok := r.Headers.Lookup(key)
				return ok && bytes.Contains(v, text)
			}
		case opLike:
			sig := a.vals[0]
			return func(_ *Segment, r *segment.Record) bool {
				v, ok := r.Headers.Lookup(key)
				return ok && signature.Of(string(v)) == sig
			}
		}
		vals := a.vals
		return func(_ *Segment, r *segment.Record) bool {
			v, ok := r.Headers.Lookup(key)
			return ok && slices.Contains(vals, string(v))
		}
	case fJSON:
		return s.compileJSON(a)
	}
	panic("selection: unknown field")
}

// compileJSON matches a JSON path. Without a Decode, a payload that holds
// no escape and not one of the wanted values' text anywhere cannot hold it
// at the path, and is not parsed.
func (s *Selection) compileJSON(a *atom) matcher {
	path, dec := a.path, s.decode
	var texts [][]byte
	if a.op != opHas {
		for _, v := range a.vals {
			texts = append(texts, []byte(v))
		}
	}
	return func(_ *Segment, r *segment.Record) bool {
		js := r.Payload
		if dec != nil {
			var ok bool
			if js, ok = dec(r.Payload); !ok {
				return false
			}
		} else if len(texts) > 0 && bytes.IndexByte(js, '\\') < 0 && !slices.ContainsFunc(texts, func(t []byte) bool { return bytes.Contains(js, t) }) {
			return false
		}
		got, ok := path.Lookup(js)
		switch {
		case !ok:
			return false
		case a.op == opHas:
			return true
		case a.op == opContains:
			return bytes.Contains([]byte(got), texts[0])
		}
		return slices.Contains(a.vals, got)
	}
}

// Payload reports whether the selection looks into payloads ($paths,
// payload ~): the records of an encrypted segment that cannot be opened
// never match it.
func (s *Selection) Payload() bool {
	return s != nil && walk(s.root, func(a *atom) bool { return a.field == fPayload || a.field == fJSON })
}

// Records reports whether the selection looks into records at all, beyond
// their time and their segment (areas, segment names): with it, the blocks
// of an encrypted segment that cannot be opened are not known to match.
func (s *Selection) Records() bool {
	return s != nil && walk(s.root, func(a *atom) bool { return a.field != fTime && a.field != fArea && a.field != fSegment })
}

// walk reports whether any atom of n satisfies f.
func walk(n node, f func(*atom) bool) bool {
	switch n := n.(type) {
	case *nAnd:
		return slices.ContainsFunc(n.xs, func(x node) bool { return walk(x, f) })
	case *nOr:
		return slices.ContainsFunc(n.xs, func(x node) bool { return walk(x, f) })
	case *nNot:
		return walk(n.x, f)
	case *atom:
		return f(n)
	}
	return false
}
