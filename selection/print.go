package selection

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// String returns the selection as an expression that parses to the same
// selection, its times absolute (RFC 3339, UTC): what a restore job keeps
// (jobs.Spec.Select) and what the console shows. The selection of every
// record is "".
func (s *Selection) String() string {
	if s.IsAll() {
		return ""
	}
	return printNode(s.root, 0)
}

// Precedence levels: an "or" inside an "and" or a "not", and an "and"
// inside a "not", are parenthesized.
const (
	precOr = iota
	precAnd
	precNot
)

func printNode(n node, prec int) string {
	switch n := n.(type) {
	case nAll:
		return ""
	case *nAnd:
		parts := make([]string, len(n.xs))
		for i, x := range n.xs {
			parts[i] = printNode(x, precAnd)
		}
		return paren(strings.Join(parts, " and "), prec > precAnd)
	case *nOr:
		parts := make([]string, len(n.xs))
		for i, x := range n.xs {
			parts[i] = printNode(x, precOr+1)
		}
		return paren(strings.Join(parts, " or "), prec > precOr)
	case *nNot:
		if a, ok := n.x.(*atom); ok && a.op != opHas && a.field != fTime {
			return printAtom(a, true)
		}
		return "not " + printNode(n.x, precNot)
	case *atom:
		return printAtom(n, false)
	}
	return "?"
}

func paren(s string, yes bool) string {
	if yes {
		return "(" + s + ")"
	}
	return s
}

// printAtom prints an atom, negated (!=, !~, not in) when neg.
func printAtom(a *atom, neg bool) string {
	f := printField(a)
	if a.op == opHas {
		return "has " + f
	}
	var vals []string
	switch a.field {
	case fTime:
		op := map[op]string{opLt: "<", opLe: "<=", opGt: ">", opGe: ">="}[a.op]
		return f + " " + op + " " + a.t.UTC().Format(time.RFC3339Nano)
	case fID:
		for _, id := range a.ids {
			vals = append(vals, id.String())
		}
	case fArea:
		for _, ar := range a.areas {
			vals = append(vals, ar.String())
		}
	default:
		for _, v := range a.vals {
			vals = append(vals, quote(v))
		}
	}
	if a.op == opContains {
		op := "~"
		if neg {
			op = "!~"
		}
		return f + " " + op + " " + vals[0]
	}
	if a.op == opLike {
		op := "like"
		if neg {
			op = "not like"
		}
		return f + " " + op + " " + vals[0]
	}
	if len(vals) == 1 {
		op := "="
		if neg {
			op = "!="
		}
		return f + " " + op + " " + vals[0]
	}
	in := "in"
	if neg {
		in = "not in"
	}
	return f + " " + in + " (" + strings.Join(vals, ", ") + ")"
}

func printField(a *atom) string {
	switch a.field {
	case fHeader:
		if plainWord(a.key) && !reserved(a.key) && !strings.HasPrefix(a.key, "header.") {
			return a.key
		}
		if plainWord(a.key) {
			return "header." + a.key
		}
		return "header." + quote(a.key)
	case fJSON:
		return a.path.String()
	}
	return a.field.name()
}

func reserved(w string) bool {
	switch w {
	case "and", "or", "not", "in", "has", "header":
		return true
	}
	_, ok := fieldNames[w]
	return ok
}

// plainWord reports whether s reads back as one word.
func plainWord(s string) bool {
	if s == "" || !utf8.ValidString(s) || strings.HasPrefix(s, "$") {
		return false
	}
	for _, r := range s {
		if wordEnd(r) || r < ' ' || r == 0x7f || r == '\\' || r == '[' || r == ']' {
			return false
		}
	}
	return true
}

// quote returns v as a word when it reads back as one, else as a JSON
// string.
func quote(v string) string {
	if plainWord(v) && !reserved(v) {
		return v
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // <num> reads as it is
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// Explain describes the selection for people: its expression, what each
// part looks at, and what lets a reader skip segments and blocks for it.
func (s *Selection) Explain() string {
	if s.IsAll() {
		return "every record; nothing is skipped\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "selection: %s\n", s.String())
	var parts []node
	if a, ok := s.root.(*nAnd); ok {
		parts = a.xs
		b.WriteString("every one of:\n")
	} else {
		parts = []node{s.root}
	}
	for _, p := range parts {
		fmt.Fprintf(&b, "  %s\n      %s\n", printNode(p, precAnd), s.explainPart(p))
	}
	return b.String()
}

// explainPart says what a reader skips by for one part.
func (s *Selection) explainPart(n node) string {
	a, ok := n.(*atom)
	neg := false
	if nn, isNot := n.(*nNot); isNot {
		a, ok = nn.x.(*atom)
		neg = true
	}
	if !ok {
		return "a combination: segments and blocks are skipped where every branch rules them out"
	}
	if neg && a.field != fArea && a.field != fSegment && a.field != fTime {
		return "a negation: read wherever some record may lack it (nothing skipped by summaries)"
	}
	switch a.field {
	case fTime:
		return "the time a record entered the dump: segments and blocks outside are skipped by their footer's time ranges"
	case fArea:
		return "the area: only those areas are listed"
	case fSegment:
		return "the segment: only those segments are read"
	case fID:
		return "a record ID: the segment of its origin, and only the block of its sequence number, is read; copies are found by their summaries' record-id values"
	case fHeader:
		if a.op == opContains {
			return "a header's value contains the text: segments whose summary lists that header's values, none containing it, are skipped"
		}
		if a.op == opLike {
			return "a header's error signature: segments whose summary lists that header's values, none of that signature, and blocks without the header are skipped"
		}
		return "a header's value: segments and blocks whose summary rules the value out are skipped"
	case fPayload:
		return "the payload's bytes: blocks whose summary's trigram filter lacks one of the text's trigrams are skipped"
	case fJSON:
		if a.op == opHas || s.decode != nil || a.op == opContains && len(a.vals[0]) < 3 {
			return "a JSON path: every payload is read"
		}
		return "a JSON value: blocks whose summary's trigram filter lacks the value's text are skipped (unless their payloads hold escapes)"
	}
	return ""
}
