package transform

import (
	"bytes"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/itchyny/gojq"
)

// The fast path's JSON rewriter: one pass over a payload's bytes that
// checks it is one JSON value, applies a program's edits (an edit tree) and
// writes the result as gojq prints it: compact, the members of each object
// sorted by key (the last of duplicates kept), numbers as written, strings
// escaped as gojq escapes them. So what the fast path delivers is byte for
// byte what the gojq path delivers (FuzzFastPath), without decoding the
// payload into maps and values. Anything it does not handle the way gojq
// would (an edit on a value of the wrong type, a string it cannot change
// on its bytes, nesting deeper than maxDepth, a payload that is not JSON
// as encoding/json reads it) makes it give up: the caller runs gojq.

// editKind is what an edit does at its path.
type editKind uint8

const (
	descend editKind = iota // nothing here: edits below (children)
	set                     // the value becomes val (a constant, or a source)
	alt                     // //=: the value becomes val when it is null, false or missing
	remove                  // del: the member is removed
	modify                  // |= fn
)

// edit is a node of the tree of a program's edits of the payload.
type edit struct {
	kind     editKind
	val      []byte // set, alt: canonical JSON; a source's is filled in per record
	src      int    // set, alt: 1 + the index of the source in the record's values; 0: val
	fn       modFn  // modify
	children []*edit
	key      string // the member this edit is of (in its parent's children)
	creates  bool   // some set or alt below: a missing or null object is created
	needs    bool   // some modify below: a missing or null object is gojq's to decide (f(null))
}

// child returns e's edit of the member key, nil when none.
func (e *edit) child(key []byte) *edit {
	for _, c := range e.children {
		if c.key == string(key) {
			return c
		}
	}
	return nil
}

// modFn changes a canonical JSON value v, appending the result to dst; false
// when it cannot (gojq then says why, or does it).
type modFn func(dst, v []byte) ([]byte, bool)

// maxDepth bounds the nesting the rewriter follows; deeper payloads go to
// gojq (which encoding/json bounds at 10000).
const maxDepth = 256

// member is an object's member written to out[start:end], its key (decoded)
// to sort by.
type member struct {
	prefix     uint64 // the key's first 8 bytes, big-endian: most comparisons end there
	key, klen  int    // the key in the rewriter's keys (no pointers: no write barriers when sorted)
	start, end int
}

// prefixOf returns the first 8 bytes of key as a big-endian number, zeros
// after its end: keys compare as their prefixes do, unless those are equal.
func prefixOf(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var p uint64
	for k := range 8 {
		p <<= 8
		if k < len(key) {
			p |= uint64(key[k])
		}
	}
	return p
}

// compare orders members by key.
func (w *rewriter) compare(a, b *member) int {
	switch {
	case a.prefix < b.prefix:
		return -1
	case a.prefix > b.prefix:
		return 1
	}
	return bytes.Compare(w.keys[a.key:a.key+a.klen], w.keys[b.key:b.key+b.klen])
}

// member adds a member written to out[start:] with key.
func (w *rewriter) member(key []byte, start int) {
	w.members = append(w.members, member{prefix: prefixOf(key), key: len(w.keys), klen: len(key), start: start, end: len(w.out)})
	w.keys = append(w.keys, key...)
}

// rewriter holds the buffers of one rewrite; pooled.
type rewriter struct {
	out     []byte
	members []member
	keys    []byte // the members' keys
	scratch []byte
	srcs    [][]byte // the canonical values of the record's sources
}

var rewriters = sync.Pool{New: func() any { return new(rewriter) }}

// rewrite returns doc rewritten with the edits of root (nil: none), false
// when the rewriter gives up.
func rewrite(doc []byte, root *edit, srcs [][]byte) ([]byte, bool) {
	w := rewriters.Get().(*rewriter)
	defer rewriters.Put(w)
	w.out, w.members, w.keys, w.srcs = w.out[:0], w.members[:0], w.keys[:0], srcs
	i := skipSpace(doc, 0)
	i, ok := w.value(doc, i, root, 0)
	if !ok || skipSpace(doc, i) != len(doc) {
		return nil, false
	}
	return bytes.Clone(w.out), true
}

// value writes the value at doc[i:], changed by e (nil: as it is), and
// returns the index after it.
func (w *rewriter) value(doc []byte, i int, e *edit, depth int) (int, bool) {
	if e == nil || e.kind == descend {
		return w.plain(doc, i, e, depth)
	}
	start := len(w.out)
	j, ok := w.plain(doc, i, nil, depth)
	if !ok {
		return 0, false
	}
	switch e.kind {
	case set:
		w.out = append(w.out[:start], w.valueOf(e)...)
	case alt:
		if v := w.out[start:]; string(v) == "null" || string(v) == "false" {
			w.out = append(w.out[:start], w.valueOf(e)...)
		}
	case modify:
		w.scratch = append(w.scratch[:0], w.out[start:]...)
		if w.out, ok = e.fn(w.out[:start], w.scratch); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	return j, true
}

// valueOf returns what a set or alt edit writes.
func (w *rewriter) valueOf(e *edit) []byte {
	if e.src > 0 {
		return w.srcs[e.src-1]
	}
	return e.val
}

// plain writes the value at doc[i:], with e's edits of its members when it
// is an object (e is nil or descends).
func (w *rewriter) plain(doc []byte, i int, e *edit, depth int) (int, bool) {
	if i >= len(doc) {
		return 0, false
	}
	if e != nil && doc[i] != '{' {
		if doc[i] != 'n' || !bytes.HasPrefix(doc[i:], []byte("null")) {
			return 0, false // an edit below a string, number, array or boolean: gojq's error
		}
		if e.needs {
			return 0, false
		}
		if !e.creates {
			w.out = append(w.out, "null"...) // only deletions below null: it stays null
			return i + 4, true
		}
		if !w.created(e, depth) {
			return 0, false
		}
		return i + 4, true
	}
	switch c := doc[i]; {
	case c == '{':
		return w.object(doc, i, e, depth)
	case c == '[':
		return w.array(doc, i, depth)
	case c == '"':
		return w.str(doc, i)
	case c == '-' || c >= '0' && c <= '9':
		j, ok := numberEnd(doc, i) // gojq keeps a json.Number's digits
		return w.verbatim(doc[i:j], j, ok)
	}
	j, ok := literalEnd(doc, i)
	return w.verbatim(doc[i:j], j, ok)
}

// verbatim writes v, the value before doc[j:], when ok.
func (w *rewriter) verbatim(v []byte, j int, ok bool) (int, bool) {
	if ok {
		w.out = append(w.out, v...)
	}
	return j, ok
}

// str writes the string at doc[i:] (a '"') as gojq writes it: as it is
// without escapes or DEL, decoded by encoding/json and written by gojq
// with them.
func (w *rewriter) str(doc []byte, i int) (int, bool) {
	end, plain, ok := scanString(doc, i)
	switch {
	case !ok:
	case plain:
		w.out = append(w.out, doc[i:end]...)
	default:
		var s string
		if ok = jsonString(doc[i:end], &s); ok {
			w.out = appendString(w.out, s)
		}
	}
	return end, ok
}

// created writes the object e creates where there was nothing or null: its
// set and alt edits' values (and the objects below that have some), its
// members sorted.
func (w *rewriter) created(e *edit, depth int) bool {
	if depth >= maxDepth {
		return false
	}
	base, objStart := len(w.members), len(w.out)
	w.out = append(w.out, '{')
	for _, c := range e.children {
		if !w.missing(c, depth) {
			return false
		}
	}
	w.closeObject(objStart, base)
	return true
}

// missing writes the member of edit c, which the object lacks (or which is
// created): nothing for a deletion or when nothing below creates, its value
// for set and alt, a created object below.
func (w *rewriter) missing(c *edit, depth int) bool {
	switch c.kind {
	case remove:
		return true
	case modify:
		return false // f(null): gojq decides
	case descend:
		if c.needs {
			return false
		}
		if !c.creates {
			return true
		}
	}
	start := len(w.out)
	if len(w.out) > 0 && w.out[len(w.out)-1] != '{' {
		w.out = append(w.out, ',')
	}
	w.out = appendString(w.out, c.key)
	w.out = append(w.out, ':')
	if c.kind == descend {
		if !w.created(c, depth+1) {
			return false
		}
	} else {
		w.out = append(w.out, w.valueOf(c)...)
	}
	w.member([]byte(c.key), start)
	return true
}

// object writes the object at doc[i:] (a '{'), with e's edits of its
// members (nil: none), its members sorted by key.
func (w *rewriter) object(doc []byte, i int, e *edit, depth int) (int, bool) {
	if depth >= maxDepth || e != nil && len(e.children) > 64 {
		return 0, false
	}
	base, objStart := len(w.members), len(w.out)
	w.out = append(w.out, '{')
	var seen uint64 // of e.children
	i, ok := members(doc, i, func(tok, key []byte, plain bool, v int) (int, bool) {
		start := len(w.out) // the member's span takes its comma: reordered with it
		if start > objStart+1 {
			w.out = append(w.out, ',')
		}
		if plain {
			w.out = append(w.out, tok...)
		} else {
			w.out = appendString(w.out, string(key))
		}
		w.out = append(w.out, ':')
		var c *edit
		if e != nil {
			for n, x := range e.children {
				if x.key == string(key) {
					c, seen = x, seen|1<<n
					break
				}
			}
		}
		if c != nil && c.kind == remove {
			j, ok := w.plain(doc, v, nil, depth+1) // checked, not kept
			w.out = w.out[:start]
			return j, ok
		}
		j, ok := w.value(doc, v, c, depth+1)
		if ok {
			w.member(key, start)
		}
		return j, ok
	})
	if !ok {
		return 0, false
	}
	if e != nil {
		for n, c := range e.children {
			if seen&(1<<n) == 0 && !w.missing(c, depth) {
				return 0, false
			}
		}
	}
	w.closeObject(objStart, base)
	return i, true
}

// closeObject sorts the members written since base (their spans in out
// after objStart, the first without its comma), keeping the last of equal
// keys as encoding/json does, and closes the object.
func (w *rewriter) closeObject(objStart, base int) {
	ms := w.members[base:]
	sorted := true
	for k := 1; k < len(ms); k++ {
		if w.compare(&ms[k-1], &ms[k]) >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		if len(ms) <= 16 {
			// Insertion sort, stable: most objects have few members.
			for k := 1; k < len(ms); k++ {
				for m := k; m > 0 && w.compare(&ms[m-1], &ms[m]) > 0; m-- {
					ms[m-1], ms[m] = ms[m], ms[m-1]
				}
			}
		} else {
			slices.SortStableFunc(ms, func(a, b member) int { return w.compare(&a, &b) })
		}
		w.scratch = append(w.scratch[:0], w.out[objStart:]...)
		w.out = append(w.out[:objStart], '{')
		first := true
		for k, m := range ms {
			if k+1 < len(ms) && w.compare(&m, &ms[k+1]) == 0 {
				continue // a duplicate: the last one is the value
			}
			span := w.scratch[m.start-objStart : m.end-objStart]
			if span[0] == ',' {
				span = span[1:]
			}
			if !first {
				w.out = append(w.out, ',')
			}
			w.out = append(w.out, span...)
			first = false
		}
	}
	w.out = append(w.out, '}')
	w.members = w.members[:base]
}

// array writes the array at doc[i:] (a '[').
func (w *rewriter) array(doc []byte, i int, depth int) (int, bool) {
	if depth >= maxDepth {
		return 0, false
	}
	w.out = append(w.out, '[')
	i, ok := elements(doc, i, func(first bool, v int) (int, bool) {
		if !first {
			w.out = append(w.out, ',')
		}
		return w.plain(doc, v, nil, depth+1)
	})
	w.out = append(w.out, ']')
	return i, ok
}

// appendString appends s as gojq writes a string.
func appendString(dst []byte, s string) []byte {
	simple := true
	for k := 0; k < len(s); k++ {
		if c := s[k]; c < 0x20 || c == '"' || c == '\\' || c == 0x7f || c >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := gojq.Marshal(s) // strings: it cannot fail
	return append(dst, b...)
}

// lookup returns the canonical JSON of the value at keys in doc, as gojq's
// path reads it: null when a member is missing or a value on the way is
// null; false when one on the way is not an object (gojq's error), or doc
// is not JSON. doc is checked whole.
func lookup(doc []byte, keys []string) ([]byte, bool) {
	w := rewriters.Get().(*rewriter)
	defer rewriters.Put(w)
	w.out, w.members, w.keys, w.srcs = w.out[:0], w.members[:0], w.keys[:0], nil
	found := []byte("null")
	i, ok := w.find(doc, skipSpace(doc, 0), keys, &found, 0)
	if !ok || skipSpace(doc, i) != len(doc) {
		return nil, false
	}
	return found, true
}

// find checks the value at doc[i:], setting *found to the canonical JSON
// of the value at keys below it (the last of duplicate members), and
// returns the index after it.
func (w *rewriter) find(doc []byte, i int, keys []string, found *[]byte, depth int) (int, bool) {
	if len(keys) == 0 {
		start := len(w.out)
		j, ok := w.plain(doc, i, nil, depth)
		*found = bytes.Clone(w.out[start:])
		w.out = w.out[:start]
		return j, ok
	}
	if i >= len(doc) || doc[i] != '{' {
		j, ok := skipValue(doc, i, depth)
		return j, ok && string(doc[i:j]) == "null" // null.a is null; "x".a an error
	}
	if depth >= maxDepth {
		return 0, false
	}
	return members(doc, i, func(_, key []byte, _ bool, v int) (int, bool) {
		if string(key) != keys[0] {
			return skipValue(doc, v, depth+1)
		}
		*found = []byte("null") // a later duplicate replaces what an earlier one had
		return w.find(doc, v, keys[1:], found, depth+1)
	})
}
