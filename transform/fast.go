package transform

import (
	"slices"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/dlqdump/dlqdump"
)

// The fast path: the programs most repairs are — a pipe of assignments
// (.payload.a.b = "x", = a path, //=), updates with ascii_downcase,
// ascii_upcase or tostring (|=) and deletions (del(.payload.k, ...)) of the
// payload's members and the headers — are applied to the payload's bytes
// in one pass (canon.go) and to the headers' map, instead of decoding the
// record for gojq and printing it again. It gives what gojq gives, byte for
// byte (FuzzFastPath); on a record it would not (a path through a value
// that is not an object, an update of a missing or non-string value, a
// payload that is not JSON), it gives up and gojq runs, with gojq's result
// or error.
//
// The edits of one program must not overlap: no path is another's prefix,
// and no path read is written, so that they can be applied at once, each
// reading the record as it was. Other programs always run on gojq.

// fastProgram is a program the fast path applies.
type fastProgram struct {
	keep    bool       // Options.KeepLayout: the payload's bytes kept but for the edits (canon_keep.go)
	splice  bool       // keep, and the payload's edits are spliced when they can be (keep_scan.go)
	payload *edit      // nil: the payload is only rewritten as gojq prints it
	headers []headerOp // in the program's order
	sources []path     // read from the record before the edits
}

// path is a path a fast program reads or writes: below "payload",
// "headers" (one key), or "id" or "time" (read only).
type path struct {
	root string
	keys []string
}

// within reports whether p is q or below it, or q is below p.
func (p path) overlaps(q path) bool {
	if p.root != q.root {
		return false
	}
	n := min(len(p.keys), len(q.keys))
	return slices.Equal(p.keys[:n], q.keys[:n])
}

// headerOp is an edit of a header.
type headerOp struct {
	key  string
	kind editKind
	val  []byte // set, alt: canonical JSON of a constant (a string or null)
	src  int    // set, alt: 1 + the source's index; 0: val
	fn   string // modify
}

// compileFast returns the fast program of q, nil when q is not one.
func compileFast(q *gojq.Query) *fastProgram {
	var stages []*gojq.Query
	var flatten func(q *gojq.Query) bool
	flatten = func(q *gojq.Query) bool {
		if q == nil || q.Meta != nil || len(q.Imports) > 0 || len(q.FuncDefs) > 0 || len(q.Patterns) > 0 {
			return false
		}
		if q.Op == gojq.OpPipe {
			return flatten(q.Left) && flatten(q.Right)
		}
		stages = append(stages, q)
		return true
	}
	if !flatten(q) {
		return nil
	}
	fp := &fastProgram{}
	var targets []path
	target := func(p path) bool {
		if p.root != "payload" && (p.root != "headers" || len(p.keys) != 1) {
			return false
		}
		for _, t := range targets {
			if t.overlaps(p) {
				return false
			}
		}
		targets = append(targets, p)
		return true
	}
	type pending struct {
		p     path
		e     *edit
		h     headerOp
		isSrc bool
	}
	var ops []pending
	for _, st := range stages {
		switch st.Op {
		case gojq.OpAssign, gojq.OpUpdateAlt, gojq.OpModify:
			p, ok := pathOf(st.Left)
			if !ok || !target(p) {
				return nil
			}
			e := &edit{kind: set}
			if st.Op == gojq.OpUpdateAlt {
				e.kind = alt
			}
			if st.Op == gojq.OpModify {
				name, ok := funcName(st.Right)
				if !ok {
					return nil
				}
				e.kind = modify
				if p.root == "payload" {
					if e.fn = payloadFn(name); e.fn == nil {
						return nil
					}
				}
				ops = append(ops, pending{p: p, e: e, h: headerOp{key: lastKey(p), kind: modify, fn: name}})
				continue
			}
			if src, ok := pathOf(st.Right); ok {
				if src.root == "headers" && len(src.keys) != 1 || (src.root == "id" || src.root == "time") && len(src.keys) != 0 {
					return nil
				}
				fp.sources = append(fp.sources, src)
				e.src = len(fp.sources)
			} else if e.val, ok = constant(st.Right); !ok {
				return nil
			}
			if p.root == "headers" && e.src == 0 && e.val[0] != '"' && string(e.val) != "null" {
				return nil // a header that is not a string: gojq's error
			}
			ops = append(ops, pending{p: p, e: e, h: headerOp{key: lastKey(p), kind: e.kind, val: e.val, src: e.src}})
		default:
			if st.Op != 0 || st.Term == nil || st.Term.Type != gojq.TermTypeFunc || st.Term.Func.Name != "del" ||
				len(st.Term.Func.Args) != 1 || len(st.Term.SuffixList) > 0 {
				return nil
			}
			var paths []*gojq.Query
			var commas func(q *gojq.Query)
			commas = func(q *gojq.Query) {
				if q.Op == gojq.OpComma {
					commas(q.Left)
					commas(q.Right)
					return
				}
				paths = append(paths, q)
			}
			commas(st.Term.Func.Args[0])
			for _, a := range paths {
				p, ok := pathOf(a)
				if !ok || !target(p) || p.root == "payload" && len(p.keys) == 0 {
					return nil
				}
				ops = append(ops, pending{p: p, e: &edit{kind: remove}, h: headerOp{key: lastKey(p), kind: remove}})
			}
		}
	}
	for _, s := range fp.sources {
		if s.root != "payload" && s.root != "headers" && s.root != "id" && s.root != "time" {
			return nil
		}
		for _, t := range targets {
			if t.overlaps(s) {
				return nil // read and written: the order of the edits would matter
			}
		}
	}
	for _, o := range ops {
		if o.p.root == "headers" {
			fp.headers = append(fp.headers, o.h)
			continue
		}
		if len(o.p.keys) == 0 {
			fp.payload = o.e // the whole payload: no other payload edit (they overlap)
			continue
		}
		if fp.payload == nil {
			fp.payload = &edit{kind: descend}
		}
		n := fp.payload
		for _, k := range o.p.keys[:len(o.p.keys)-1] {
			c := n.child([]byte(k))
			if c == nil {
				c = &edit{kind: descend, key: k}
				n.children = append(n.children, c)
			}
			n = c
		}
		o.e.key = o.p.keys[len(o.p.keys)-1]
		n.children = append(n.children, o.e)
	}
	mark(fp.payload)
	return fp
}

// mark sets creates and needs on the descending edits below e.
func mark(e *edit) {
	if e == nil {
		return
	}
	for _, c := range e.children {
		mark(c)
		e.creates = e.creates || c.creates || c.kind == set || c.kind == alt
		e.needs = e.needs || c.needs || c.kind == modify
	}
}

func lastKey(p path) string {
	if len(p.keys) == 0 {
		return ""
	}
	return p.keys[len(p.keys)-1]
}

// pathOf returns the path q is (.a.b."c d"), false when it is something
// else.
func pathOf(q *gojq.Query) (path, bool) {
	if q == nil || q.Op != 0 || q.Term == nil || q.Term.Type != gojq.TermTypeIndex || len(q.FuncDefs) > 0 {
		return path{}, false
	}
	var keys []string
	add := func(ix *gojq.Index) bool {
		if ix == nil || ix.IsSlice || ix.Start != nil || ix.End != nil {
			return false
		}
		switch {
		case ix.Str != nil && len(ix.Str.Queries) == 0:
			keys = append(keys, ix.Str.Str)
		case ix.Str == nil && ix.Name != "":
			keys = append(keys, ix.Name)
		default:
			return false
		}
		return true
	}
	if !add(q.Term.Index) {
		return path{}, false
	}
	for _, s := range q.Term.SuffixList {
		if s.Iter || s.Optional || !add(s.Index) {
			return path{}, false
		}
	}
	return path{root: keys[0], keys: keys[1:]}, true
}

// funcName returns the name of the function q calls without arguments.
func funcName(q *gojq.Query) (string, bool) {
	if q == nil || q.Op != 0 || q.Term == nil || q.Term.Type != gojq.TermTypeFunc || len(q.Term.Func.Args) > 0 || len(q.Term.SuffixList) > 0 || len(q.FuncDefs) > 0 {
		return "", false
	}
	switch n := q.Term.Func.Name; n {
	case "ascii_downcase", "ascii_upcase", "tostring":
		return n, true
	}
	return "", false
}

// constant returns q's value printed by gojq when q is a literal (null,
// true, false, a number, a string without interpolation, an array or object
// of them).
func constant(q *gojq.Query) ([]byte, bool) {
	if !isConstant(q, false) {
		return nil, false
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, false
	}
	it := code.Run(nil)
	v, ok := it.Next()
	if !ok {
		return nil, false
	}
	if _, isErr := v.(error); isErr {
		return nil, false
	}
	if _, more := it.Next(); more {
		return nil, false
	}
	b, err := gojq.Marshal(v)
	return b, err == nil
}

func isConstant(q *gojq.Query, inArray bool) bool {
	if q == nil || len(q.FuncDefs) > 0 || q.Meta != nil || len(q.Imports) > 0 || len(q.Patterns) > 0 {
		return false
	}
	if q.Op == gojq.OpComma && inArray {
		return isConstant(q.Left, true) && isConstant(q.Right, true)
	}
	return q.Op == 0 && isConstantTerm(q.Term)
}

func isConstantTerm(t *gojq.Term) bool {
	if t == nil || len(t.SuffixList) > 0 {
		return false
	}
	switch t.Type {
	case gojq.TermTypeNull, gojq.TermTypeTrue, gojq.TermTypeFalse, gojq.TermTypeNumber:
		return true
	case gojq.TermTypeString:
		return t.Str != nil && len(t.Str.Queries) == 0
	case gojq.TermTypeUnary:
		return t.Unary != nil && t.Unary.Term != nil && t.Unary.Term.Type == gojq.TermTypeNumber && len(t.Unary.Term.SuffixList) == 0
	case gojq.TermTypeArray:
		return t.Array != nil && (t.Array.Query == nil || isConstant(t.Array.Query, true))
	case gojq.TermTypeObject:
		if t.Object == nil {
			return false
		}
		for _, kv := range t.Object.KeyVals {
			if kv.KeyQuery != nil || kv.KeyString != nil && len(kv.KeyString.Queries) > 0 || kv.Val == nil || !isConstant(kv.Val, false) ||
				kv.Key != "" && kv.Key[0] == '$' {
				return false
			}
		}
		return true
	}
	return false
}

// payloadFn returns the update of a payload value that name makes.
func payloadFn(name string) modFn {
	switch name {
	case "ascii_downcase":
		return asciiCase('A', 'Z', 'a'-'A')
	case "ascii_upcase":
		return asciiCase('a', 'z', -('a' - 'A'))
	case "tostring":
		return func(dst, v []byte) ([]byte, bool) {
			if v[0] == '"' {
				return append(dst, v...), true
			}
			return appendString(dst, string(v)), true
		}
	}
	return nil
}

// asciiCase changes the letters from lo to hi of a string by d; false for
// anything else than a string without escapes (gojq decides).
func asciiCase(lo, hi byte, d int) modFn {
	return func(dst, v []byte) ([]byte, bool) {
		if v[0] != '"' {
			return nil, false
		}
		for _, c := range v {
			if c == '\\' {
				return nil, false
			}
		}
		for _, c := range v {
			if c >= lo && c <= hi {
				c = byte(int(c) + d)
			}
			dst = append(dst, c)
		}
		return dst, true
	}
}

// apply runs the fast program on r; false (r unchanged) when it gives up.
// With KeepLayout, an edit that keeps the length of the value it changes
// changes r.Payload's bytes in place (as a dlqdump.Transform may).
func (fp *fastProgram) apply(r *dlqdump.Replay) bool {
	var srcs [][]byte
	if len(fp.sources) > 0 {
		srcs = make([][]byte, len(fp.sources))
		for k, s := range fp.sources {
			v, ok := fp.source(r, s)
			if !ok {
				return false
			}
			srcs[k] = v
		}
	}
	var payload []byte
	var ok bool
	var sp *splicer // the payload's edits spliced in once the headers' are done
	switch {
	case fp.keep && fp.payload == nil:
		_, ok = scanEdits(r.Payload, nil, nil) // checked, kept
		payload = r.Payload
	case fp.splice:
		sp = splicers.Get().(*splicer)
		defer splicers.Put(sp)
		if ok = sp.plan(r.Payload, fp.payload, srcs); !ok {
			sp = nil
			payload, ok = keepRewrite(r.Payload, fp.payload, srcs)
		}
	case fp.keep:
		payload, ok = keepRewrite(r.Payload, fp.payload, srcs)
	default:
		payload, ok = rewrite(r.Payload, fp.payload, srcs)
	}
	if !ok {
		return false
	}
	headers := r.Headers
	if len(fp.headers) > 0 {
		headers = make(dlqdump.Headers, len(r.Headers)+len(fp.headers))
		for k, v := range r.Headers {
			headers[k] = v
		}
		for _, h := range fp.headers {
			if !h.apply(headers, r.Headers, srcs) {
				return false
			}
		}
	}
	if sp != nil {
		payload = sp.apply(r.Payload) // in place when the lengths are kept: nothing can fail after this
	}
	r.Payload, r.Headers = payload, headers
	return true
}

// source returns the canonical JSON of what path s reads of r.
func (fp *fastProgram) source(r *dlqdump.Replay, s path) ([]byte, bool) {
	switch s.root {
	case "id":
		return appendString(nil, r.ID.String()), true
	case "time":
		return appendString(nil, r.Time.UTC().Format(time.RFC3339Nano)), true
	case "headers":
		v, ok := r.Headers[s.keys[0]]
		if !ok {
			return []byte("null"), true
		}
		return appendString(nil, v), true
	}
	return lookup(r.Payload, s.keys)
}

// apply applies the edit of a header to h, the program's input being in;
// false to leave the record to gojq.
func (o *headerOp) apply(h, in dlqdump.Headers, srcs [][]byte) bool {
	v, present := in[o.key]
	switch o.kind {
	case remove:
		delete(h, o.key)
		return true
	case modify:
		if !present || !utf8.ValidString(v) {
			return false // f(null), or gojq's runes
		}
		switch o.fn {
		case "ascii_downcase":
			h[o.key] = asciiString(v, 'A', 'Z', 'a'-'A')
		case "ascii_upcase":
			h[o.key] = asciiString(v, 'a', 'z', -('a' - 'A'))
		}
		return true // tostring: a string stays
	case alt:
		if present {
			return true // a header is a string: neither null nor false
		}
	}
	val := o.val
	if o.src > 0 {
		val = srcs[o.src-1]
	}
	switch {
	case string(val) == "null":
		delete(h, o.key)
	case val[0] == '"':
		var s string
		if !jsonString(val, &s) {
			return false
		}
		h[o.key] = s
	default:
		return false // not a string: gojq's error
	}
	return true
}

// asciiString changes the letters from lo to hi of s by d.
func asciiString(s string, lo, hi byte, d int) string {
	b := []byte(s)
	for k, c := range b {
		if c >= lo && c <= hi {
			b[k] = byte(int(c) + d)
		}
	}
	return string(b)
}
