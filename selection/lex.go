package selection

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer: the tokens of an expression, read one at a time by
// parser.next.

type tokKind uint8

const (
	tEOF tokKind = iota
	tWord
	tString
	tPath
	tOp
	tLParen
	tRParen
	tComma
)

type token struct {
	kind     tokKind
	text     string // as written
	val      string // a string's value
	pos, end int
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end"
	case tString:
		return "string " + t.text
	}
	return strconv.Quote(t.text)
}

// wordEnd reports whether r ends a word (outside strings).
func wordEnd(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune("()=!<>~,\"", r) || unicode.IsControl(r)
}

// next reads the next token into p.tok.
func (p *parser) next() error {
	s := p.expr
	i := p.off
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	t := token{pos: i, end: i}
	defer func() { p.off = t.end }()
	if i >= len(s) {
		t.kind = tEOF
		p.tok = t
		return nil
	}
	switch c := s[i]; {
	case c == '(' || c == ')' || c == ',':
		t.kind, t.end = map[byte]tokKind{'(': tLParen, ')': tRParen, ',': tComma}[c], i+1
	case c == '"':
		end, err := stringEnd(s, i)
		if err != nil {
			t.end = len(s)
			p.tok = t
			return p.fail(t, "%v", err)
		}
		t.kind, t.end = tString, end
		if err := json.Unmarshal([]byte(s[i:end]), &t.val); err != nil {
			p.tok = t
			return p.fail(t, "not a JSON string: %v", err)
		}
	case c == '$':
		end, err := pathEnd(s, i)
		t.kind, t.end = tPath, end
		if err != nil {
			p.tok = t
			return p.fail(t, "%v", err)
		}
	case strings.IndexByte("=!<>~", c) >= 0:
		t.kind, t.end = tOp, i+1
		if i+1 < len(s) && (s[i+1] == '=' && c != '=' && c != '~' || c == '!' && s[i+1] == '~') {
			t.end = i + 2
		}
		if s[i:t.end] == "!" {
			p.tok = t
			return p.fail(t, "! alone: want != or !~ (or the word not)")
		}
	default:
		if r, _ := utf8.DecodeRuneInString(s[i:]); unicode.IsControl(r) {
			t.end = i + utf8.RuneLen(r)
			p.tok = t
			return p.fail(t, "unexpected character %U (quote it in a \"string\")", r)
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if wordEnd(r) {
				break
			}
			j += n
		}
		t.kind, t.end = tWord, j
	}
	t.text = s[t.pos:t.end]
	p.tok = t
	return nil
}

// stringEnd returns the end of the JSON string starting at s[i].
func stringEnd(s string, i int) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("a string without its closing quote")
}

// pathEnd returns the end of the JSON path starting at s[i] ('$'): the
// first space or operator outside brackets.
func pathEnd(s string, i int) (int, error) {
	depth := 0
	for j := i; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '[':
			depth++
		case c == ']':
			depth--
		case c == '"' && depth > 0:
			end, err := stringEnd(s, j)
			if err != nil {
				return len(s), err
			}
			j = end - 1
		case depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r' || strings.IndexByte("()=!<>~,", c) >= 0):
			return j, nil
		}
	}
	if depth > 0 {
		return len(s), fmt.Errorf("a [ without ]")
	}
	return len(s), nil
}
