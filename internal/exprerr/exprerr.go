// Package exprerr places an error in an expression: the column of a byte
// offset, the part of the expression that is wrong, and a caret line under
// it, for the errors of the selection language and of jq programs.
package exprerr

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Column returns the column of byte offset pos of expr, counted in
// characters from 1.
func Column(expr string, pos int) int {
	return utf8.RuneCountInString(expr[:min(max(pos, 0), len(expr))]) + 1
}

// Part returns the bytes [pos, end) of expr quoted, as an error shows
// them (at least one byte), or "the end" past it.
func Part(expr string, pos, end int) string {
	if pos >= len(expr) {
		return "the end"
	}
	return fmt.Sprintf("%q", expr[pos:min(max(end, pos+1), len(expr))])
}

// Caret returns expr on one line and a line marking [pos, end) with
// carets, for a terminal.
func Caret(expr string, pos, end int) string {
	line := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		return r
	}, expr)
	pos = min(max(pos, 0), len(expr))
	n := max(1, utf8.RuneCountInString(expr[pos:min(max(end, pos), len(expr))]))
	return line + "\n" + strings.Repeat(" ", Column(expr, pos)-1) + strings.Repeat("^", n)
}
