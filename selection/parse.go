package selection

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/signature"
	"github.com/dlqdump/dlqdump/sink"
)

// The expression's tree. Parse builds it; compile (compile.go) turns it
// into the matcher; plan.go decides with it what a segment's summary lets
// skip; print.go writes it back.

type node interface{ isNode() }

type (
	nAll struct{}            // the empty expression: every record
	nAnd struct{ xs []node } // every one
	nOr  struct{ xs []node } // any one
	nNot struct{ x node }
	// atom is one comparison.
	atom struct {
		field field
		key   string    // fHeader
		path  *JSONPath // fJSON
		op    op
		vals  []string           // opEq (one or more: in), opContains (one), opLike (one signature)
		t     time.Time          // opLt, opLe, opGt, opGe
		ids   []segment.RecordID // fID
		areas []sink.Area        // fArea
	}
)

func (nAll) isNode()  {}
func (*nAnd) isNode() {}
func (*nOr) isNode()  {}
func (*nNot) isNode() {}
func (*atom) isNode() {}

type field uint8

const (
	fTime field = iota
	fID
	fArea
	fSegment
	fPayload
	fHeader
	fJSON
)

var fieldNames = map[string]field{"time": fTime, "id": fID, "area": fArea, "segment": fSegment, "payload": fPayload}

type op uint8

const (
	opEq       op = iota // = and in (vals)
	opContains           // ~
	opLike               // like: the same error signature (package signature)
	opHas                // has
	opLt
	opLe
	opGt
	opGe
)

// Options tune Parse.
type Options struct {
	// Now is the time now-DURATION counts back from. Default time.Now().
	Now time.Time
	// Decode, when set, turns a payload into the JSON that $paths look at
	// (protobuf payloads into protojson); ok false matches no path.
	// Default: the payload is the JSON.
	Decode func(payload []byte) (js []byte, ok bool)
}

// maxDepth bounds the nesting of an expression (parentheses and "not"):
// deeper is refused, not a stack overflow.
const maxDepth = 64

// maxLen bounds the length of an expression.
const maxLen = 64 << 10

// Parse parses and compiles an expression. The empty expression (or only
// spaces) selects every record. Errors are an *Error naming the part that
// is wrong.
func Parse(expr string, o *Options) (*Selection, error) {
	p := &parser{expr: expr}
	if o != nil {
		p.now = o.Now
	}
	if p.now.IsZero() {
		p.now = time.Now()
	}
	if len(expr) > maxLen {
		return nil, &Error{Expr: expr, Pos: maxLen, End: len(expr), Msg: fmt.Sprintf("longer than %d bytes", maxLen)}
	}
	if !utf8.ValidString(expr) {
		i := 0
		for i < len(expr) {
			r, n := utf8.DecodeRuneInString(expr[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return nil, &Error{Expr: expr, Pos: i, End: i + 1, Msg: "not UTF-8"}
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	var root node = nAll{}
	if p.tok.kind != tEOF {
		var err error
		if root, err = p.or(0); err != nil {
			return nil, err
		}
		if p.tok.kind != tEOF {
			return nil, p.fail(p.tok, "unexpected %s: want and, or, or the end", p.tok.describe())
		}
	}
	var dec func([]byte) ([]byte, bool)
	if o != nil {
		dec = o.Decode
	}
	return newSelection(root, dec), nil
}

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

type parser struct {
	expr string
	now  time.Time
	off  int
	tok  token
}

func (p *parser) fail(t token, format string, args ...any) error {
	return &Error{Expr: p.expr, Pos: t.pos, End: t.end, Msg: fmt.Sprintf(format, args...)}
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

func (p *parser) isWord(w string) bool { return p.tok.kind == tWord && p.tok.text == w }

// or = and { "or" and }
func (p *parser) or(depth int) (node, error) {
	x, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	xs := []node{x}
	for p.isWord("or") {
		if err := p.next(); err != nil {
			return nil, err
		}
		y, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		xs = append(xs, y)
	}
	if len(xs) == 1 {
		return x, nil
	}
	return &nOr{xs: xs}, nil
}

// and = unary { ["and"] unary }
func (p *parser) and(depth int) (node, error) {
	x, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	xs := []node{x}
	for {
		if p.isWord("and") {
			if err := p.next(); err != nil {
				return nil, err
			}
		} else if p.tok.kind == tEOF || p.tok.kind == tRParen || p.isWord("or") {
			break
		}
		y, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		xs = append(xs, y)
	}
	if len(xs) == 1 {
		return x, nil
	}
	return &nAnd{xs: xs}, nil
}

// unary = "not" unary | "(" expr ")" | "has" field | compare
func (p *parser) unary(depth int) (node, error) {
	if depth >= maxDepth {
		return nil, p.fail(p.tok, "nested deeper than %d", maxDepth)
	}
	switch {
	case p.isWord("not"):
		if err := p.next(); err != nil {
			return nil, err
		}
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &nNot{x: x}, nil
	case p.tok.kind == tLParen:
		open := p.tok
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.tok.kind == tRParen {
			return nil, p.fail(p.tok, "empty parentheses")
		}
		x, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			if p.tok.kind == tEOF {
				return nil, p.fail(open, "( without )")
			}
			return nil, p.fail(p.tok, "unexpected %s: want )", p.tok.describe())
		}
		return x, p.next()
	case p.isWord("has"):
		if err := p.next(); err != nil {
			return nil, err
		}
		a, ft, err := p.field()
		if err != nil {
			return nil, err
		}
		if a.field != fHeader && a.field != fJSON {
			return nil, p.fail(ft, "has takes a header (header.KEY) or a JSON path ($.a.b), not %s", ft.text)
		}
		a.op = opHas
		return a, nil
	}
	return p.compare()
}

// field reads a field: a name, header.KEY, header."KEY", a bare header key
// or a $path.
func (p *parser) field() (*atom, token, error) {
	t := p.tok
	switch t.kind {
	case tPath:
		jp, err := ParseJSONPath(t.text)
		if err != nil {
			return nil, t, p.fail(t, "%v", err)
		}
		return &atom{field: fJSON, path: jp}, t, p.next()
	case tWord:
	case tEOF:
		return nil, t, p.fail(t, "the expression ends: want a field (time, id, area, segment, payload, header.KEY or $.json.path)")
	default:
		return nil, t, p.fail(t, "unexpected %s: want a field (time, id, area, segment, payload, header.KEY or $.json.path)", t.describe())
	}
	if f, ok := fieldNames[t.text]; ok {
		return &atom{field: f}, t, p.next()
	}
	switch t.text {
	case "and", "or", "not", "in", "has":
		return nil, t, p.fail(t, "%s where a field belongs (time, id, area, segment, payload, header.KEY or $.json.path)", t.text)
	case "header", "header.":
		if err := p.next(); err != nil {
			return nil, t, err
		}
		if t.text == "header." && p.tok.kind == tString && p.tok.pos == t.end {
			k := p.tok
			t.end, t.text = k.end, p.expr[t.pos:k.end]
			if k.val == "" {
				return nil, t, p.fail(t, "an empty header key")
			}
			return &atom{field: fHeader, key: k.val}, t, p.next()
		}
		return nil, t, p.fail(t, `want header.KEY or header."KEY"`)
	}
	key := strings.TrimPrefix(t.text, "header.")
	if key == "" || strings.HasPrefix(t.text, "$") {
		return nil, t, p.fail(t, "an empty header key")
	}
	return &atom{field: fHeader, key: key}, t, p.next()
}

// compare = field op value | field ["not"] "in" "(" value {"," value} ")"
func (p *parser) compare() (node, error) {
	a, ft, err := p.field()
	if err != nil {
		return nil, err
	}
	opTok := p.tok
	neg := false
	var ops string
	switch {
	case p.isWord("not"):
		if err := p.next(); err != nil {
			return nil, err
		}
		if !p.isWord("in") && !p.isWord("like") {
			return nil, p.fail(p.tok, "want in or like after %s not", ft.text)
		}
		neg, ops = true, p.tok.text
	case p.isWord("in"), p.isWord("like"):
		ops = p.tok.text
	case p.tok.kind == tOp:
		ops = p.tok.text
	default:
		return nil, p.fail(p.tok, "unexpected %s after %s: want an operator (%s)", p.tok.describe(), ft.text, a.field.ops())
	}
	opTok.end = p.tok.end
	if !slices.Contains(strings.Split(a.field.ops(), ", "), ops) {
		return nil, p.fail(opTok, "%s takes %s, not %s", a.field.name(), a.field.ops(), ops)
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	var vals []token
	if ops == "in" {
		if p.tok.kind != tLParen {
			return nil, p.fail(p.tok, "want ( after in")
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		for {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
			if p.tok.kind == tComma {
				if err := p.next(); err != nil {
					return nil, err
				}
				continue
			}
			if p.tok.kind != tRParen {
				return nil, p.fail(p.tok, "unexpected %s: want , or )", p.tok.describe())
			}
			if err := p.next(); err != nil {
				return nil, err
			}
			break
		}
	} else {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		vals = []token{v}
	}
	switch ops {
	case "=", "in":
		a.op = opEq
	case "!=":
		a.op, neg = opEq, true
	case "~":
		a.op = opContains
	case "like":
		a.op = opLike
		vals[0].val = signature.Of(vals[0].val)
	case "!~":
		a.op, neg = opContains, true
	case "<":
		a.op = opLt
	case "<=":
		a.op = opLe
	case ">":
		a.op = opGt
	case ">=":
		a.op = opGe
	}
	if err := p.values(a, vals); err != nil {
		return nil, err
	}
	if neg {
		return &nNot{x: a}, nil
	}
	return a, nil
}

// value reads a value: a word or a string.
func (p *parser) value() (token, error) {
	t := p.tok
	switch t.kind {
	case tWord:
		t.val = t.text
	case tString:
	case tEOF:
		return t, p.fail(t, "the expression ends: want a value")
	default:
		return t, p.fail(t, "unexpected %s: want a value (a word or a \"string\")", t.describe())
	}
	return t, p.next()
}

// values checks and converts the values of a comparison for its field.
func (p *parser) values(a *atom, vals []token) error {
	for _, v := range vals {
		switch a.field {
		case fTime:
			t, err := parseTime(v.val, p.now)
			if err != nil {
				return p.fail(v, "%v", err)
			}
			a.t = t
		case fID:
			id, err := segment.ParseRecordID(v.val)
			if err != nil {
				return p.fail(v, "%v", err)
			}
			a.ids = append(a.ids, id)
		case fArea:
			ar, err := sink.ParseArea(v.val)
			if err != nil {
				return p.fail(v, "area %q: want ready, quarantine or archive", v.val)
			}
			a.areas = append(a.areas, ar)
		case fSegment:
			if !strings.HasSuffix(v.val, segment.Ext) || strings.ContainsAny(v.val, "/\\\x00") || strings.HasPrefix(v.val, ".") {
				return p.fail(v, "%q is not a segment name (NAME.dlq)", v.val)
			}
			a.vals = append(a.vals, v.val)
		case fPayload:
			if v.val == "" {
				return p.fail(v, "an empty text: every payload contains it")
			}
			a.vals = append(a.vals, v.val)
		default:
			a.vals = append(a.vals, v.val)
		}
	}
	return nil
}

func (f field) name() string {
	switch f {
	case fHeader:
		return "a header"
	case fJSON:
		return "a JSON path"
	}
	for k, v := range fieldNames {
		if v == f {
			return k
		}
	}
	return "?"
}

// ops lists the operators a field takes.
func (f field) ops() string {
	switch f {
	case fTime:
		return "<, <=, >, >="
	case fID, fArea, fSegment:
		return "=, !=, in"
	case fPayload:
		return "~, !~"
	case fJSON:
		return "=, !=, in, ~, !~"
	}
	return "=, !=, in, ~, !~, like"
}

// timeLayouts are the absolute times a selection takes, UTC unless they
// say otherwise.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseTime parses an absolute time or now-DURATION.
func parseTime(s string, now time.Time) (time.Time, error) {
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if s == "now" {
		return now.UTC(), nil
	}
	if rest, ok := strings.CutPrefix(s, "now-"); ok {
		d, err := ParseAgo(rest)
		if err == nil {
			return now.Add(-d).UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-03-01T12:00:00Z), 2026-03-01T12:00 (UTC), a date, or now-DURATION (now-90m, now-7d)", s)
}

// ParseAgo parses a Go duration, also taking the units d (24h) and w (7d),
// e.g. "7d" or "1d12h". It is the duration of now-DURATION, and of the
// command line's --since 7d.
func ParseAgo(s string) (time.Duration, error) {
	var total time.Duration
	rest := s
	for rest != "" {
		i := strings.IndexAny(rest, "dw")
		if i < 0 {
			break
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, err
		}
		unit := 24 * time.Hour
		if rest[i] == 'w' {
			unit *= 7
		}
		total += time.Duration(n * float64(unit))
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, err
		}
		total += d
	}
	if total < 0 || s == "" {
		return 0, strconv.ErrRange
	}
	return total, nil
}
