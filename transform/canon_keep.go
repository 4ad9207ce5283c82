package transform

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
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
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		i++
	} else {
		for {
			if i >= len(doc) || doc[i] != '"' {
				return 0, false
			}
			k, ok := skipString(doc, i)
			if !ok {
				return 0, false
			}
			key, ok := decodedKey(doc[i:k])
			if !ok {
				return 0, false
			}
			start := len(w.out)
			if start > objStart+1 {
				w.out = append(w.out, ',')
			}
			w.out = append(w.out, doc[i:k]...)
			w.out = append(w.out, ':')
			i = skipSpace(doc, k)
			if i >= len(doc) || doc[i] != ':' {
				return 0, false
			}
			i = skipSpace(doc, i+1)
			var c *edit
			for n, x := range e.children {
				if x.key == string(key) {
					c, seen = x, seen|1<<n
					break
				}
			}
			if c != nil && c.kind == remove {
				if i, ok = skipValue(doc, i, depth+1); !ok {
					return 0, false
				}
				w.out = w.out[:start]
			} else if i, ok = w.keepValue(doc, i, c, depth+1); !ok {
				return 0, false
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

// skipValue checks the JSON value at doc[i:] and returns the index after it.
func skipValue(doc []byte, i int, depth int) (int, bool) {
	if i >= len(doc) {
		return 0, false
	}
	switch c := doc[i]; {
	case c == '"':
		return skipString(doc, i)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return 0, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = skipSpace(doc, i+1)
		if i < len(doc) && doc[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(doc) || doc[i] != '"' {
					return 0, false
				}
				if i, ok = skipString(doc, i); !ok {
					return 0, false
				}
				i = skipSpace(doc, i)
				if i >= len(doc) || doc[i] != ':' {
					return 0, false
				}
				i = skipSpace(doc, i+1)
			}
			if i, ok = skipValue(doc, i, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(doc, i)
			if i < len(doc) && doc[i] == ',' {
				i = skipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == end {
				return i + 1, true
			}
			return 0, false
		}
	case c == '-' || c >= '0' && c <= '9':
		return numberEnd(doc, i)
	case bytes.HasPrefix(doc[i:], []byte("true")), bytes.HasPrefix(doc[i:], []byte("null")):
		return i + 4, true
	case bytes.HasPrefix(doc[i:], []byte("false")):
		return i + 5, true
	}
	return 0, false
}

// skipString checks the string at doc[i:] (a '"'): no control character,
// valid UTF-8, escapes as JSON has them; it returns the index after it.
func skipString(doc []byte, i int) (int, bool) {
	ascii := true
	for j := i + 1; j < len(doc); j++ {
		for j+8 <= len(doc) && !special(binary.LittleEndian.Uint64(doc[j:])) {
			j += 8
		}
		if j >= len(doc) {
			break
		}
		switch strClass[doc[j]] {
		case 1:
			if !ascii && !utf8.Valid(doc[i+1:j]) {
				return 0, false
			}
			return j + 1, true
		case 2:
			if doc[j] == '\\' {
				j++
				if j >= len(doc) {
					return 0, false
				}
				switch doc[j] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					if j+4 >= len(doc) || !isHex(doc[j+1]) || !isHex(doc[j+2]) || !isHex(doc[j+3]) || !isHex(doc[j+4]) {
						return 0, false
					}
					j += 4
				default:
					return 0, false
				}
			}
		case 3:
			return 0, false
		case 4:
			ascii = false
		}
	}
	return 0, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
