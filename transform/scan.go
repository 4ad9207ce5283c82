package transform

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"
)

// The fast path's scanning of a payload: each value checked as
// encoding/json reads it (strict JSON, valid UTF-8 in strings: encoding/json
// would make U+FFFD of invalid bytes, which the fast path leaves to gojq),
// nesting bounded by maxDepth.

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\n' || doc[i] == '\r' || doc[i] == '\t') {
		i++
	}
	return i
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
func special(x uint64) bool { return specials(x) != 0 }

// specials returns the high bits special sets: the lowest set one is that
// of the first special byte of x (little-endian). A borrow or a carry
// only goes from a byte that is special to the bytes above it, so the
// bits above the lowest may be set for bytes that are not.
func specials(x uint64) uint64 {
	q, bs := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x | (q-ones)&^q | (bs-ones)&^bs | x | (x + ones)) & highs
}

// scanString checks the string at doc[i:] (a '"') and returns the index
// after it; plain when gojq writes it as it is (no escape, no DEL).
func scanString(doc []byte, i int) (end int, plain, ok bool) {
	plain = true
	ascii := true
	for j := i + 1; j < len(doc); j++ {
		for j+8 <= len(doc) {
			m := specials(binary.LittleEndian.Uint64(doc[j:]))
			if m != 0 {
				j += bits.TrailingZeros64(m) >> 3 // the first special byte
				break
			}
			j += 8 // eight bytes written as they are
		}
		if j >= len(doc) {
			break
		}
		switch strClass[doc[j]] {
		case 1:
			if !ascii && !utf8.Valid(doc[i+1:j]) {
				return 0, false, false
			}
			return j + 1, plain, true
		case 2:
			plain = false
			if doc[j] != '\\' {
				continue // DEL
			}
			j++
			if j >= len(doc) {
				return 0, false, false
			}
			switch doc[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(doc) || !isHex(doc[j+1]) || !isHex(doc[j+2]) || !isHex(doc[j+3]) || !isHex(doc[j+4]) {
					return 0, false, false
				}
				j += 4
			default:
				return 0, false, false
			}
		case 3:
			return 0, false, false // not JSON
		case 4:
			ascii = false
		}
	}
	return 0, false, false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// jsonString decodes a JSON string token into *s.
func jsonString(tok []byte, s *string) bool {
	if bytes.IndexByte(tok, '\\') < 0 {
		*s = string(tok[1 : len(tok)-1])
		return true
	}
	return json.Unmarshal(tok, s) == nil
}

// decodedKey returns the key a member's key token names: without escapes,
// the bytes between the quotes.
func decodedKey(tok []byte) ([]byte, bool) {
	if bytes.IndexByte(tok, '\\') < 0 {
		return tok[1 : len(tok)-1], true
	}
	var s string
	if !jsonString(tok, &s) {
		return nil, false
	}
	return []byte(s), true
}

// numberEnd checks the grammar of the number at doc[i:] and returns the
// index after it (i when it is not a number).
func numberEnd(doc []byte, i int) (int, bool) {
	j := i
	if doc[j] == '-' {
		j++
	}
	switch {
	case j < len(doc) && doc[j] == '0':
		j++
	case j < len(doc) && doc[j] >= '1' && doc[j] <= '9':
		j = digitsEnd(doc, j+1)
	default:
		return i, false
	}
	if j < len(doc) && doc[j] == '.' {
		k := digitsEnd(doc, j+1)
		if k == j+1 {
			return i, false
		}
		j = k
	}
	if j < len(doc) && (doc[j] == 'e' || doc[j] == 'E') {
		j++
		if j < len(doc) && (doc[j] == '+' || doc[j] == '-') {
			j++
		}
		k := digitsEnd(doc, j)
		if k == j {
			return i, false
		}
		j = k
	}
	return j, true
}

// digitsEnd returns the index after the digits at doc[j:].
func digitsEnd(doc []byte, j int) int {
	for j < len(doc) && doc[j] >= '0' && doc[j] <= '9' {
		j++
	}
	return j
}

// literalEnd returns the index after the true, false or null at doc[i:]
// (i when there is none).
func literalEnd(doc []byte, i int) (int, bool) {
	switch {
	case bytes.HasPrefix(doc[i:], []byte("true")), bytes.HasPrefix(doc[i:], []byte("null")):
		return i + 4, true
	case bytes.HasPrefix(doc[i:], []byte("false")):
		return i + 5, true
	}
	return i, false
}

// members walks the members of the object at doc[i:] (a '{'): f gets each
// one's key token, its key (decoded) and the index of its value, and
// returns the index after the value. members returns the index after the
// object.
func members(doc []byte, i int, f func(tok, key []byte, plain bool, v int) (int, bool)) (int, bool) {
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return 0, false
		}
		k, plain, ok := scanString(doc, i)
		if !ok {
			return 0, false
		}
		key, ok := decodedKey(doc[i:k])
		if !ok {
			return 0, false
		}
		j := skipSpace(doc, k)
		if j >= len(doc) || doc[j] != ':' {
			return 0, false
		}
		if i, ok = f(doc[i:k], key, plain, skipSpace(doc, j+1)); !ok {
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

// elements walks the elements of the array at doc[i:] (a '['): f gets the
// index of each and returns the index after it. elements returns the index
// after the array.
func elements(doc []byte, i int, f func(first bool, v int) (int, bool)) (int, bool) {
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return i + 1, true
	}
	for first := true; ; first = false {
		var ok bool
		if i, ok = f(first, i); !ok {
			return 0, false
		}
		i = skipSpace(doc, i)
		if i < len(doc) && doc[i] == ',' {
			i = skipSpace(doc, i+1)
			continue
		}
		if i < len(doc) && doc[i] == ']' {
			return i + 1, true
		}
		return 0, false
	}
}

// skipValue checks the JSON value at doc[i:] and returns the index after it.
func skipValue(doc []byte, i int, depth int) (int, bool) {
	if i >= len(doc) {
		return 0, false
	}
	switch c := doc[i]; {
	case c == '"':
		end, _, ok := scanString(doc, i)
		return end, ok
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return 0, false
		}
		if c == '[' {
			return elements(doc, i, func(_ bool, v int) (int, bool) { return skipValue(doc, v, depth+1) })
		}
		return members(doc, i, func(_, _ []byte, _ bool, v int) (int, bool) { return skipValue(doc, v, depth+1) })
	case c == '-' || c >= '0' && c <= '9':
		return numberEnd(doc, i)
	}
	return literalEnd(doc, i)
}
