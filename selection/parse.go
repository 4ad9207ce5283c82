package selection

import (
	"fmt"
	"slices"
	"strings"
	"time"
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

type parser struct {
	expr string
	now  time.Time
	off  int
	tok  token
}

func (p *parser) fail(t token, format string, args ...any) error {
	return &Error{Expr: p.expr, Pos: t.pos, End: t.end, Msg: fmt.Sprintf(format, args...)}
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
