package transform

import (
	"bytes"
)

// The fast path with Options.KeepLayout: the payload's bytes are kept as
// stored but for the values the program changes, and the objects on the
// way to them, which are written compactly, their members in the stored
// order (with a new one last). The result is the JSON value gojq gives (a
// later duplicate key still wins), not gojq's bytes: no sorting of keys,
// no rewriting of the rest, so no more work than checking the payload is
// JSON and copying it.

// keepRewrite returns doc with the edits of root applied in place, false
// when the rewriter gives up.
func keepRewrite(doc []byte, root *edit, srcs [][]byte) ([]byte, bool) {
	w := rewriters.Get().(*rewriter)
	defer rewriters.Put(w)
	w.out, w.srcs = w.out[:0], srcs
	i := skipSpace(doc, 0)
	i, ok := w.keepValue(doc, i, root, 0)
	if !ok || skipSpace(doc, i) != len(doc) {
		return nil, false
	}
	return bytes.Clone(w.out), true
}

// keepValue writes the value at doc[i:] changed by e (nil: as stored).
func (w *rewriter) keepValue(doc []byte, i int, e *edit, depth int) (int, bool) {
	if e == nil {
		j, ok := skipValue(doc, i, depth)
		if ok {
			w.out = append(w.out, doc[i:j]...)
		}
		return j, ok
	}
	if e.kind == descend {
		if i < len(doc) && doc[i] == '{' {
			return w.keepObject(doc, i, e, depth)
		}
		// Nothing or null below which to create: as the canonical path
		// does (it writes the same bytes there).
		return w.plain(doc, i, e, depth)
	}
	j, ok := skipValue(doc, i, depth)
	if !ok {
		return 0, false
	}
	v := doc[i:j]
	switch e.kind {
	case set:
		w.out = append(w.out, w.valueOf(e)...)
	case alt:
		if string(v) == "null" || string(v) == "false" {
			v = w.valueOf(e)
		}
		w.out = append(w.out, v...)
	case modify:
		if v[0] == '{' || v[0] == '[' {
			return 0, false // tostring of it: gojq's text of it
		}
		if w.out, ok = e.fn(w.out, v); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	return j, true
}

// keepObject writes the object at doc[i:] compactly, its members in the
// stored order changed by e's edits, the members e adds last.
func (w *rewriter) keepObject(doc []byte, i int, e *edit, depth int) (int, bool) {
	if depth >= maxDepth || len(e.children) > 64 {
		return 0, false
	}
	objStart := len(w.out)
	w.out = append(w.out, '{')
	var seen uint64
	i, ok := members(doc, i, func(tok, key []byte, _ bool, v int) (int, bool) {
		start := len(w.out)
		if start > objStart+1 {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, tok...)
		w.out = append(w.out, ':')
		var c *edit
		for n, x := range e.children {
			if x.key == string(key) {
				c, seen = x, seen|1<<n
				break
			}
		}
		if c != nil && c.kind == remove {
			w.out = w.out[:start]
			return skipValue(doc, v, depth+1)
		}
		return w.keepValue(doc, v, c, depth+1)
	})
	if !ok {
		return 0, false
	}
	base := len(w.members)
	for n, c := range e.children {
		if seen&(1<<n) == 0 && !w.missing(c, depth) {
			return 0, false
		}
	}
	w.members = w.members[:base] // added last, not sorted
	w.out = append(w.out, '}')
	return i, true
}
