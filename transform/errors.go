package transform

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrJQ means a jq program does not compile. CompileJQ's errors are an
// *Error wrapping it.
var ErrJQ = errors.New("dlqdump: bad jq program")

// Error says what part of a jq program is wrong: the bytes [Pos, End) of
// Expr, and why. Pos is -1 when gojq does not say where.
type Error struct {
	Expr     string
	Pos, End int
	Msg      string
}

// Error returns "dlqdump: bad jq program: at column N (TEXT): MSG", the
// column counted in characters from 1.
func (e *Error) Error() string {
	if e.Pos < 0 {
		return fmt.Sprintf("%v: %s", ErrJQ, e.Msg)
	}
	part := " (the end)"
	if e.Pos < len(e.Expr) {
		end := min(max(e.End, e.Pos+1), len(e.Expr))
		part = fmt.Sprintf(" (%q)", e.Expr[e.Pos:end])
	}
	return fmt.Sprintf("%v: at column %d%s: %s", ErrJQ, e.Column(), part, e.Msg)
}

// Unwrap returns ErrJQ.
func (e *Error) Unwrap() error { return ErrJQ }

// Column returns the column of Pos, counted in characters from 1 (0 when
// the position is not known).
func (e *Error) Column() int {
	if e.Pos < 0 {
		return 0
	}
	return utf8.RuneCountInString(e.Expr[:min(e.Pos, len(e.Expr))]) + 1
}

// Caret returns the program on one line and a line marking the wrong part
// with carets, for a terminal; "" when the position is not known.
func (e *Error) Caret() string {
	if e.Pos < 0 {
		return ""
	}
	line := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		return r
	}, e.Expr)
	n := max(1, utf8.RuneCountInString(e.Expr[min(e.Pos, len(e.Expr)):min(max(e.End, e.Pos), len(e.Expr))]))
	return line + "\n" + strings.Repeat(" ", e.Column()-1) + strings.Repeat("^", n)
}
