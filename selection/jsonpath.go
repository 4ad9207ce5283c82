package selection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrPath means a JSON path does not parse.
var ErrPath = errors.New("dlqdump: bad JSON path")

// JSONPath is a path into a JSON document: object keys and array indexes,
// written $.user.email, user.email, items[0].sku or $["odd key"].
type JSONPath struct {
	text  string
	steps []pathStep
}

type pathStep struct {
	key   string
	index int // -1 for a key
}

// String returns the path as it was given.
func (p *JSONPath) String() string { return p.text }

// ParseJSONPath parses a path; an error wraps ErrPath and says where.
func ParseJSONPath(s string) (*JSONPath, error) {
	p := &JSONPath{text: s}
	rest := strings.TrimSpace(s)
	rest = strings.TrimPrefix(rest, "$")
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrPath, s, why)
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			rest = rest[1:]
			i := strings.IndexAny(rest, ".[")
			if i < 0 {
				i = len(rest)
			}
			if i == 0 {
				return nil, bad("an empty key")
			}
			p.steps = append(p.steps, pathStep{key: rest[:i], index: -1})
			rest = rest[i:]
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, bad("a [ without ]")
			}
			in := rest[1:end]
			if strings.HasPrefix(in, `"`) {
				// A quoted key may hold ']': find the closing quote.
				k, tail, err := cutQuoted(rest[1:])
				if err != nil || !strings.HasPrefix(tail, "]") {
					return nil, bad("a quoted key must be a JSON string followed by ]")
				}
				p.steps = append(p.steps, pathStep{key: k, index: -1})
				rest = tail[1:]
				continue
			}
			n, err := strconv.Atoi(in)
			if err != nil || n < 0 {
				return nil, bad(fmt.Sprintf("[%s]: want an index (0, 1, ...) or a quoted key", in))
			}
			p.steps = append(p.steps, pathStep{index: n})
			rest = rest[end+1:]
		default:
			if len(p.steps) > 0 {
				return nil, bad(fmt.Sprintf("%q: want . or [ between steps", rest))
			}
			rest = "." + rest // user.email
		}
	}
	if len(p.steps) == 0 {
		return nil, bad("no key or index")
	}
	return p, nil
}

// cutQuoted reads the JSON string at the start of s.
func cutQuoted(s string) (string, string, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var k string
	if err := dec.Decode(&k); err != nil {
		return "", "", err
	}
	return k, s[dec.InputOffset():], nil
}

// Lookup returns the value at the path in the JSON document js: a string's
// text, or the JSON text of a number, boolean, null, object or array. ok is
// false when js is not JSON or has nothing there. It reads tokens up to the
// value, without decoding the rest of the document.
func (p *JSONPath) Lookup(js []byte) (value string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	for _, st := range p.steps {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		d, isDelim := tok.(json.Delim)
		switch {
		case isDelim && d == '{' && st.index < 0:
			if !seekKey(dec, st.key) {
				return "", false
			}
		case isDelim && d == '[' && st.index >= 0:
			if !seekIndex(dec, st.index) {
				return "", false
			}
		default:
			return "", false
		}
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return "", false
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	return string(raw), true
}

// seekKey reads an object's members up to the value of key.
func seekKey(dec *json.Decoder, key string) bool {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if k, _ := tok.(string); k == key {
			return true
		}
		if skipValue(dec) != nil {
			return false
		}
	}
	return false
}

// seekIndex reads an array's elements up to element i.
func seekIndex(dec *json.Decoder, i int) bool {
	for n := 0; dec.More(); n++ {
		if n == i {
			return true
		}
		if skipValue(dec) != nil {
			return false
		}
	}
	return false
}

// skipValue reads one value, however nested.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}
