package transform

import (
	"encoding/binary"
	"math/bits"
	"sync"
)

// The fast path with Options.KeepLayout, for the programs that change
// members that are there: one scan of the payload checks it is one JSON
// value (as skipValue does) and finds the value of each path the program
// changes; the output is then written once, splicing the new values into
// the stored bytes, and when each new value has the length of the old one
// (ascii_downcase, ascii_upcase, a constant of the same length) the
// payload's bytes are changed in place, without copying it. Anything else
// (a member to create or delete, a duplicate key on the way, a path
// through a value that is not an object, a source read from the payload)
// is left to keepRewrite (canon_keep.go), which handles it or gives up.

// maxSpliceDepth bounds the paths splicing follows; deeper ones go to
// keepRewrite.
const maxSpliceDepth = 16

// splices reports whether root's edits can be spliced: changes of members,
// no deletions, at most 64 members changed per object, paths at most
// maxSpliceDepth deep.
func splices(root *edit, depth int) bool {
	if root == nil || root.kind != descend || depth >= maxSpliceDepth || len(root.children) > 64 {
		return false
	}
	for _, c := range root.children {
		switch c.kind {
		case descend:
			if !splices(c, depth+1) {
				return false
			}
		case set, alt, modify:
		default:
			return false
		}
	}
	return true
}

// span is the value an edit changes: doc[start:end], its new value
// splicer.out[at:at+n].
type span struct {
	e             *edit
	start, end    int
	at, n         int
	changed, same bool // changed: a new value; same: of the old one's length
}

// splicer holds the buffers of one splice; pooled.
type splicer struct {
	spans []span
	out   []byte // the new values
}

var splicers = sync.Pool{New: func() any { return new(splicer) }}

// plan finds the values root's edits change in doc and computes their new
// values; false when the payload is not one JSON value or the edits are
// not only changes of values that are there.
func (s *splicer) plan(doc []byte, root *edit, srcs [][]byte) bool {
	s.spans, s.out = s.spans[:0], s.out[:0]
	var ok bool
	if s.spans, ok = scanEdits(doc, root, s.spans); !ok {
		return false
	}
	for k := range s.spans {
		sp := &s.spans[k]
		v := doc[sp.start:sp.end]
		sp.at = len(s.out)
		switch e := sp.e; e.kind {
		case set:
			s.out = append(s.out, valueOf(e, srcs)...)
		case alt:
			if string(v) != "null" && string(v) != "false" {
				continue // kept
			}
			s.out = append(s.out, valueOf(e, srcs)...)
		case modify:
			if v[0] == '{' || v[0] == '[' {
				return false // tostring of it: gojq's text of it
			}
			if s.out, ok = e.fn(s.out, v); !ok {
				return false
			}
		}
		sp.n, sp.changed = len(s.out)-sp.at, true
		sp.same = sp.n == len(v)
	}
	return true
}

// valueOf returns what a set or alt edit writes.
func valueOf(e *edit, srcs [][]byte) []byte {
	if e.src > 0 {
		return srcs[e.src-1]
	}
	return e.val
}

// apply writes the planned values into doc: in place when each has its old
// value's length, else into a new slice, which it returns.
func (s *splicer) apply(doc []byte) []byte {
	grow, inPlace := 0, true
	for _, sp := range s.spans {
		if sp.changed {
			grow += sp.n - (sp.end - sp.start)
			inPlace = inPlace && sp.same
		}
	}
	if inPlace {
		for _, sp := range s.spans {
			if sp.changed {
				copy(doc[sp.start:sp.end], s.out[sp.at:sp.at+sp.n])
			}
		}
		return doc
	}
	out := make([]byte, 0, len(doc)+grow)
	last := 0
	for _, sp := range s.spans {
		if sp.changed {
			out = append(out, doc[last:sp.start]...)
			out = append(out, s.out[sp.at:sp.at+sp.n]...)
			last = sp.end
		}
	}
	return append(out, doc[last:]...)
}

// pathLevel is an object of the path scanEdits is in: the edit of its
// members, and which of them it met.
type pathLevel struct {
	e    *edit
	seen uint64
}

// States of scanEdits.
const (
	scanValue = iota // a value at doc[i:]
	scanAfter        // after a value: a separator, the container's end, or the document's
	scanKey          // a member's key at doc[i:]
)

// scanEdits checks that doc is one JSON value (as skipValue reads it: strict
// JSON, valid UTF-8 in strings, nesting bounded by maxDepth) and appends to
// spans the value each leaf edit below root (nil: none) changes, in the
// order of doc. False when doc is not JSON, or an edit's path does not lead
// to a member that is there and only once (the path through an object
// each time).
func scanEdits(doc []byte, root *edit, spans []span) ([]span, bool) {
	var objects [maxDepth / 64]uint64  // which open containers are objects
	var path [maxSpliceDepth]pathLevel // path[k]: the object on the path at depth k+1
	depth, on := 0, 0                  // containers open; objects of the path open (depths 1..on)
	object := false                    // the innermost open container is an object
	next := root                       // the edit of the value at doc[i:] when it is on the path
	st, i := scanValue, skipSpace(doc, 0)
	for {
		switch st {
		case scanValue:
			if i >= len(doc) {
				return nil, false
			}
			switch c := doc[i]; {
			case c == '{' || c == '[':
				if depth >= maxDepth {
					return nil, false
				}
				if c == '{' {
					objects[depth>>6] |= 1 << (depth & 63)
				} else {
					objects[depth>>6] &^= 1 << (depth & 63)
				}
				depth, object = depth+1, c == '{'
				if next != nil {
					if c != '{' || on == len(path) {
						return nil, false // a path through an array
					}
					path[on] = pathLevel{e: next}
					on++
					next = nil
				}
				i = skipSpace(doc, i+1)
				switch {
				case c == '{' && i < len(doc) && doc[i] == '}', c == '[' && i < len(doc) && doc[i] == ']':
					i++
					if !closed(&depth, &on, path[:]) {
						return nil, false
					}
					object = depth > 0 && objects[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
					st = scanAfter
				case c == '{':
					st = scanKey
				}
				continue
			case next != nil:
				return nil, false // a path through a string, number, boolean or null
			case c == '"':
				end, ok := stringEnd(doc, i)
				if !ok {
					return nil, false
				}
				i = end
			case c == '-' || c >= '0' && c <= '9':
				end, ok := numberEnd(doc, i)
				if !ok {
					return nil, false
				}
				i = end
			default:
				end, ok := literalEnd(doc, i)
				if !ok {
					return nil, false
				}
				i = end
			}
			st = scanAfter
		case scanAfter:
			i = skipSpace(doc, i)
			if depth == 0 {
				return spans, i == len(doc)
			}
			if i >= len(doc) {
				return nil, false
			}
			switch c := doc[i]; {
			case c == ',':
				i = skipSpace(doc, i+1)
				if object {
					st = scanKey
				} else {
					st = scanValue
				}
			case object && c == '}', !object && c == ']':
				i++
				if !closed(&depth, &on, path[:]) {
					return nil, false
				}
				object = depth > 0 && objects[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
			default:
				return nil, false
			}
		case scanKey:
			if i >= len(doc) || doc[i] != '"' {
				return nil, false
			}
			k, ok := stringEnd(doc, i)
			if !ok {
				return nil, false
			}
			var match *edit
			if on == depth { // an object of the path: is this member an edit's?
				key, ok := decodedKey(doc[i:k])
				if !ok {
					return nil, false
				}
				l := &path[on-1]
				for n, c := range l.e.children {
					if c.key == string(key) {
						if l.seen&(1<<n) != 0 {
							return nil, false // a duplicate: keepRewrite
						}
						l.seen |= 1 << n
						match = c
						break
					}
				}
			}
			j := skipSpace(doc, k)
			if j >= len(doc) || doc[j] != ':' {
				return nil, false
			}
			i, st = skipSpace(doc, j+1), scanValue
			switch {
			case match == nil:
			case match.kind == descend:
				next = match
			default:
				end, ok := skipValue(doc, i, depth)
				if !ok {
					return nil, false
				}
				spans = append(spans, span{e: match, start: i, end: end})
				i, st = end, scanAfter
			}
		}
	}
}

// stringEnd checks the string at doc[i:] (a '"') and returns the index
// after it: eight bytes at a time up to its closing quote when it has
// nothing but bytes written as they are (most strings), else by
// scanString.
func stringEnd(doc []byte, i int) (int, bool) {
	for j := i + 1; j+8 <= len(doc); j += 8 {
		if m := specials(binary.LittleEndian.Uint64(doc[j:])); m != 0 {
			if j += bits.TrailingZeros64(m) >> 3; doc[j] == '"' {
				return j + 1, true
			}
			break
		}
	}
	end, _, ok := scanString(doc, i)
	return end, ok
}

// closed ends the innermost container: false when it is an object of the
// path that lacks a member an edit is of.
func closed(depth, on *int, path []pathLevel) bool {
	if *on == *depth {
		l := path[*on-1]
		if l.seen != uint64(1)<<len(l.e.children)-1 {
			return false // a member to create, or f(null): keepRewrite
		}
		*on--
	}
	*depth--
	return true
}
