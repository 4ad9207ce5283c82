package selection

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrSelection means an expression does not parse. Parse's errors are an
// *Error wrapping it.
var ErrSelection = errors.New("dlqdump: bad selection")

// Error says what part of an expression is wrong: the bytes [Pos, End) of
// Expr, and why.
type Error struct {
	Expr     string
	Pos, End int
	Msg      string
}

// Error returns "dlqdump: bad selection: at column N (TEXT): MSG", the
// column counted in characters from 1.
func (e *Error) Error() string {
	part := ""
	if e.Pos < len(e.Expr) {
		end := min(max(e.End, e.Pos+1), len(e.Expr))
		part = fmt.Sprintf(" (%q)", e.Expr[e.Pos:end])
	} else {
		part = " (the end)"
	}
	return fmt.Sprintf("%v: at column %d%s: %s", ErrSelection, e.Column(), part, e.Msg)
}

// Unwrap returns ErrSelection.
func (e *Error) Unwrap() error { return ErrSelection }

// Column returns the column of Pos, counted in characters from 1.
func (e *Error) Column() int { return utf8.RuneCountInString(e.Expr[:min(e.Pos, len(e.Expr))]) + 1 }

// Caret returns the expression on one line and a line marking the wrong
// part with carets, for a terminal.
func (e *Error) Caret() string {
	line := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		return r
	}, e.Expr)
	n := max(1, utf8.RuneCountInString(e.Expr[min(e.Pos, len(e.Expr)):min(max(e.End, e.Pos), len(e.Expr))]))
	return line + "\n" + strings.Repeat(" ", e.Column()-1) + strings.Repeat("^", n)
}
