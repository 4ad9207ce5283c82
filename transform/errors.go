package transform

import (
	"errors"
	"fmt"

	"github.com/dlqdump/dlqdump/internal/exprerr"
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
	return fmt.Sprintf("%v: at column %d (%s): %s", ErrJQ, e.Column(), exprerr.Part(e.Expr, e.Pos, e.End), e.Msg)
}

// Unwrap returns ErrJQ.
func (e *Error) Unwrap() error { return ErrJQ }

// Column returns the column of Pos, counted in characters from 1 (0 when
// the position is not known).
func (e *Error) Column() int {
	if e.Pos < 0 {
		return 0
	}
	return exprerr.Column(e.Expr, e.Pos)
}

// Caret returns the program on one line and a line marking the wrong part
// with carets, for a terminal; "" when the position is not known.
func (e *Error) Caret() string {
	if e.Pos < 0 {
		return ""
	}
	return exprerr.Caret(e.Expr, e.Pos, e.End)
}
