package transform

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"slices"
	"sync"
	"unicode/utf8"

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

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\n' || doc[i] == '\r' || doc[i] == '\t') {
		i++
	}
	return i
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
		return w.number(doc, i)
	case bytes.HasPrefix(doc[i:], []byte("true")):
		w.out = append(w.out, "true"...)
		return i + 4, true
	case bytes.HasPrefix(doc[i:], []byte("false")):
		w.out = append(w.out, "false"...)
		return i + 5, true
	case bytes.HasPrefix(doc[i:], []byte("null")):
		w.out = append(w.out, "null"...)
		return i + 4, true
	}
	return 0, false
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
	if depth >= maxDepth {
		return 0, false
	}
	base, objStart := len(w.members), len(w.out)
	w.out = append(w.out, '{')
	var seen uint64 // of e.children (up to 64 edits in one object)
	if e != nil && len(e.children) > 64 {
		return 0, false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		i++
	} else {
		for {
			if i >= len(doc) || doc[i] != '"' {
				return 0, false
			}
			start := len(w.out) // the member's span takes its comma: reordered with it
			if start > objStart+1 {
				w.out = append(w.out, ',')
			}
			k, ok := w.str(doc, i)
			if !ok {
				return 0, false
			}
			key, ok := decodedKey(doc[i:k])
			if !ok {
				return 0, false
			}
			i = skipSpace(doc, k)
			if i >= len(doc) || doc[i] != ':' {
				return 0, false
			}
			w.out = append(w.out, ':')
			i = skipSpace(doc, i+1)
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
				if i, ok = w.plain(doc, i, nil, depth+1); !ok { // checked, not kept
					return 0, false
				}
				w.out = w.out[:start]
			} else {
				if i, ok = w.value(doc, i, c, depth+1); !ok {
					return 0, false
				}
				w.member(key, start)
			}
			i = skipSpace(doc, i)
			if i < len(doc) && doc[i] == ',' {
				i = skipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == '}' {
				i++
				break
			}
			return 0, false
		}
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
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		w.out = append(w.out, ']')
		return i + 1, true
	}
	for first := true; ; first = false {
		if !first {
			w.out = append(w.out, ',')
		}
		var ok bool
		if i, ok = w.plain(doc, i, nil, depth+1); !ok {
			return 0, false
		}
		i = skipSpace(doc, i)
		if i < len(doc) && doc[i] == ',' {
			i = skipSpace(doc, i+1)
			continue
		}
		if i < len(doc) && doc[i] == ']' {
			w.out = append(w.out, ']')
			return i + 1, true
		}
		return 0, false
	}
}

// strClass classes the bytes of a string: 0 written as they are, 1 the
// closing quote, 2 an escape or a byte gojq escapes (DEL), 3 a control
// character (not JSON), 4 the first byte of a non-ASCII character.
var strClass = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 3
	}
	t['"'], t['\\'], t[0x7f] = 1, 2, 2
	for c := 0x80; c < 0x100; c++ {
		t[c] = 4
	}
	return t
}()

// Eight bytes at once (in a uint64), as in Bit Twiddling Hacks: an
// expression that sets the high bit of a byte where the condition holds
// for some byte of the eight (possibly others too), and of none where it
// holds for none.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special reports whether one of the eight bytes of x is not written as it
// is in a string: a control character (below 0x20), a quote, a
// backslash, DEL or a non-ASCII byte (0x7f and above: x+1 or x has its
// high bit).
func special(x uint64) bool {
	q, bs := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs|x|(x+ones))&highs != 0
}

// str writes the string at doc[i:] (a '"') as gojq writes it. A string
// without escapes, control characters or DEL, valid UTF-8, is written as
// it is; one with escapes or DEL is decoded by encoding/json and written
// by gojq; one with invalid UTF-8 is left to gojq.
func (w *rewriter) str(doc []byte, i int) (int, bool) {
	plain, ascii := true, true
	for j := i + 1; j < len(doc); j++ {
		for j+8 <= len(doc) && !special(binary.LittleEndian.Uint64(doc[j:])) {
			j += 8 // eight bytes written as they are
		}
		if j >= len(doc) {
			break
		}
		switch strClass[doc[j]] {
		case 0:
			continue
		case 1:
			if !ascii && !utf8.Valid(doc[i+1:j]) {
				return 0, false // encoding/json makes U+FFFD of it: gojq decides
			}
			if plain {
				w.out = append(w.out, doc[i:j+1]...)
				return j + 1, true
			}
			var s string
			if json.Unmarshal(doc[i:j+1], &s) != nil {
				return 0, false
			}
			w.out = appendString(w.out, s)
			return j + 1, true
		case 2:
			plain = false
			if doc[j] == '\\' {
				j++ // the escaped character (a '"' does not end the string)
			}
		case 3:
			return 0, false // not JSON
		case 4:
			ascii = false
		}
	}
	return 0, false
}

// decodedKey returns the key a member's raw key token names, given the
// token and how it was written (canonical). Without escapes it is the
// bytes between the quotes.
func decodedKey(raw []byte) ([]byte, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// number writes the number at doc[i:] as it is written (gojq keeps a
// json.Number's digits), after checking its grammar.
func (w *rewriter) number(doc []byte, i int) (int, bool) {
	j, ok := numberEnd(doc, i)
	if ok {
		w.out = append(w.out, doc[i:j]...)
	}
	return j, ok
}

// numberEnd checks the grammar of the number at doc[i:] and returns the
// index after it.
func numberEnd(doc []byte, i int) (int, bool) {
	j := i
	if doc[j] == '-' {
		j++
	}
	digits := func() bool {
		k := j
		for j < len(doc) && doc[j] >= '0' && doc[j] <= '9' {
			j++
		}
		return j > k
	}
	switch {
	case j < len(doc) && doc[j] == '0':
		j++
	case !digits():
		return 0, false
	}
	if j < len(doc) && doc[j] == '.' {
		j++
		if !digits() {
			return 0, false
		}
	}
	if j < len(doc) && (doc[j] == 'e' || doc[j] == 'E') {
		j++
		if j < len(doc) && (doc[j] == '+' || doc[j] == '-') {
			j++
		}
		if !digits() {
			return 0, false
		}
	}
	return j, true
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
	w.out, w.members, w.srcs = w.out[:0], w.members[:0], nil
	found := []byte("null")
	i := skipSpace(doc, 0)
	i, ok := w.find(doc, i, keys, &found, 0)
	if !ok || skipSpace(doc, i) != len(doc) {
		return nil, false
	}
	return found, true
}

// find reads the value at doc[i:], setting *found to the canonical JSON of
// the value at keys below it (the last of duplicate members), and returns
// the index after it.
func (w *rewriter) find(doc []byte, i int, keys []string, found *[]byte, depth int) (int, bool) {
	if len(keys) == 0 {
		start := len(w.out)
		j, ok := w.plain(doc, i, nil, depth)
		if ok {
			*found = bytes.Clone(w.out[start:])
		}
		w.out = w.out[:start]
		return j, ok
	}
	if i >= len(doc) || doc[i] != '{' {
		start := len(w.out)
		j, ok := w.plain(doc, i, nil, depth)
		null := ok && string(w.out[start:]) == "null"
		w.out = w.out[:start]
		return j, null // null.a is null; "x".a an error
	}
	if depth >= maxDepth {
		return 0, false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return 0, false
		}
		start := len(w.out)
		k, ok := w.str(doc, i)
		w.out = w.out[:start]
		if !ok {
			return 0, false
		}
		key, ok := decodedKey(doc[i:k])
		if !ok {
			return 0, false
		}
		i = skipSpace(doc, k)
		if i >= len(doc) || doc[i] != ':' {
			return 0, false
		}
		i = skipSpace(doc, i+1)
		if string(key) == keys[0] {
			*found = []byte("null") // a later duplicate replaces what an earlier one had
			i, ok = w.find(doc, i, keys[1:], found, depth+1)
		} else {
			i, ok = w.plain(doc, i, nil, depth+1)
			w.out = w.out[:start]
		}
		if !ok {
			return 0, false
		}
		i = skipSpace(doc, i)
		if i < len(doc) && doc[i] == ',' {
			i = skipSpace(doc, i+1)
			continue
		}
		if i < len(doc) && doc[i] == '}' {
			return i + 1, true
		}
		return 0, false
	}
}

// jsonString decodes a JSON string token into *s.
func jsonString(tok []byte, s *string) bool {
	if bytes.IndexByte(tok, '\\') < 0 {
		*s = string(tok[1 : len(tok)-1])
		return true
	}
	return json.Unmarshal(tok, s) == nil
}
