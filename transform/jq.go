package transform

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	"github.com/dlqdump/dlqdump"
)

// Options tune CompileJQ.
type Options struct {
	// Timeout bounds the time the program may take on one record: a
	// record it takes longer on is quarantined, with that said. Default
	// DefaultTimeout.
	Timeout time.Duration
	// KeepLayout delivers the payloads the fast path changes (see the
	// package's doc) with their bytes as stored but for what the program
	// changes: the key order, spacing and escapes of the rest are kept
	// (when the program creates or deletes a member, the objects on the
	// way to it are written compactly). The payload is the JSON value
	// gojq gives, not gojq's bytes (keys sorted, compact), which the
	// records the fast path leaves to gojq still get. A change of members
	// that are there is made in one scan of the payload, in place when
	// the new values are as long as the old ones (ascii_downcase, say):
	// several times cheaper than writing gojq's bytes (docs/BENCHMARKS.md).
	// Default false: every payload is written as gojq writes it.
	KeepLayout bool
}

// DefaultTimeout is the default of Options.Timeout.
const DefaultTimeout = time.Second

// maxLen bounds the length of a program.
const maxLen = 64 << 10

// JQ is a compiled jq program that transforms records (see the package's
// doc). It is safe for concurrent use.
type JQ struct {
	expr    string
	code    *gojq.Code
	fast    *fastProgram // nil: every record runs on gojq (fast.go)
	timeout time.Duration
}

// CompileJQ compiles a jq program. Errors are an *Error naming the part of
// the program that is wrong, when gojq says (a syntax error, an unknown
// function or variable).
func CompileJQ(expr string, o *Options) (*JQ, error) {
	j := &JQ{expr: expr, timeout: DefaultTimeout}
	if o != nil && o.Timeout > 0 {
		j.timeout = o.Timeout
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &Error{Expr: expr, Pos: 0, End: len(expr), Msg: "an empty program (. delivers records as they are)"}
	}
	if len(expr) > maxLen {
		return nil, &Error{Expr: expr, Pos: maxLen, End: len(expr), Msg: fmt.Sprintf("longer than %d bytes", maxLen)}
	}
	q, err := gojq.Parse(expr)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			end := min(max(pe.Offset, 0), len(expr))
			pos := max(end-len(pe.Token), 0)
			if pe.Token == "" && strings.Contains(pe.Error(), "unterminated string") {
				pos = max(strings.LastIndexByte(expr[:end], '"'), 0) // where it opens
			}
			return nil, &Error{Expr: expr, Pos: pos, End: end, Msg: pe.Error()}
		}
		return nil, &Error{Expr: expr, Pos: -1, Msg: err.Error()}
	}
	// No environment ($ENV, env is {}), no modules, no input.
	j.code, err = gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		pos, end := locate(expr, err.Error())
		return nil, &Error{Expr: expr, Pos: pos, End: end, Msg: err.Error()}
	}
	if j.fast = compileFast(q); j.fast != nil && o != nil {
		j.fast.keep = o.KeepLayout
		j.fast.splice = o.KeepLayout && splices(j.fast.payload, 0)
	}
	return j, nil
}

// notDefined matches gojq's compile errors that name what is unknown.
var notDefined = regexp.MustCompile(`^(?:function|variable) not defined: (\$?[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)`)

// locate finds where in expr the unknown name a compile error msg names
// is used: its first use that is not a definition. -1 when it cannot tell.
func locate(expr, msg string) (pos, end int) {
	m := notDefined.FindStringSubmatch(msg)
	if m == nil {
		return -1, -1
	}
	name := m[1]
	for i := 0; ; {
		k := strings.Index(expr[i:], name)
		if k < 0 {
			return -1, -1
		}
		k += i
		e := k + len(name)
		before := k == 0 || !isIdent(expr[k-1]) && expr[k-1] != '$'
		after := e == len(expr) || !isIdent(expr[e])
		def := strings.HasSuffix(strings.TrimRight(expr[:k], " \t\n"), "def")
		if before && after && !def {
			return k, e
		}
		i = e
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// String returns the program as given.
func (j *JQ) String() string { return j.expr }

// errTimeout is a record the program took longer than Options.Timeout on.
var errTimeout = errors.New("took longer than the time a record may take")

// Transform runs the program on r and changes r to what it returns (a
// dlqdump.Transform). Its error is the program's on this record (the
// Restorer quarantines the record with it), or ctx's; r is unchanged then.
// With Options.KeepLayout it may change r.Payload's bytes in place, as a
// dlqdump.Transform may: give it a copy of bytes that must stay as they are.
func (j *JQ) Transform(ctx context.Context, r *dlqdump.Replay) error {
	if j.fast != nil && j.fast.apply(r) {
		return nil
	}
	return j.slow(ctx, r)
}

// slow runs the program on r with gojq.
func (j *JQ) slow(ctx context.Context, r *dlqdump.Replay) error {
	in, kind := input(r)
	rctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	it := j.code.RunWithContext(rctx, in)
	v, ok := it.Next()
	if !ok {
		return fmt.Errorf("jq: no result (the program gave nothing for this record: select or empty?)")
	}
	if err, isErr := v.(error); isErr {
		return j.runError(ctx, rctx, err)
	}
	if w, more := it.Next(); more {
		if err, isErr := w.(error); isErr {
			return j.runError(ctx, rctx, err)
		}
		return fmt.Errorf("jq: more than one result, want one record")
	}
	if err := output(v, kind, r); err != nil {
		return fmt.Errorf("jq: %w", err)
	}
	return nil
}

// runError returns the error of a run that failed with err.
func (j *JQ) runError(ctx, rctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if rctx.Err() != nil {
		return fmt.Errorf("jq: %w (%s)", errTimeout, j.timeout)
	}
	var he *gojq.HaltError
	if errors.As(err, &he) && he.Value() == nil {
		return fmt.Errorf("jq: halt")
	}
	return fmt.Errorf("jq: %v", err)
}

// Apply sets o to transform with j: o.Transform is j's Transform, and
// o.TransformWorkers runtime.GOMAXPROCS(0), since a JQ is safe for
// concurrent use and changes nothing but its record (a dry run still
// transforms one record at a time).
func (j *JQ) Apply(o *dlqdump.RunOptions) {
	o.Transform = j.Transform
	o.TransformWorkers = runtime.GOMAXPROCS(0)
}
