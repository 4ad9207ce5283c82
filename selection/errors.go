package selection

import (
	"errors"
	"fmt"

	"github.com/dlqdump/dlqdump/internal/exprerr"
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
	return fmt.Sprintf("%v: at column %d (%s): %s", ErrSelection, e.Column(), exprerr.Part(e.Expr, e.Pos, e.End), e.Msg)
}

// Unwrap returns ErrSelection.
func (e *Error) Unwrap() error { return ErrSelection }

// Column returns the column of Pos, counted in characters from 1.
func (e *Error) Column() int { return exprerr.Column(e.Expr, e.Pos) }

// Caret returns the expression on one line and a line marking the wrong
// part with carets, for a terminal.
func (e *Error) Caret() string { return exprerr.Caret(e.Expr, e.Pos, e.End) }
