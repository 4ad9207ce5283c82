// Package errs builds the errors that wrap several of the module's
// sentinels at once, each of which begins with "dlqdump: ".
package errs

import "strings"

const prefix = "dlqdump: "

// Chain returns an error wrapping each of errs in order (errors.Is and
// errors.As find every one), whose message is theirs joined by ": " with the
// "dlqdump: " prefix kept on the first alone:
//
//	Chain(ErrClosed, ErrNotWritten, errors.New("the queue was shut down"))
//	// dlqdump: closed: record not written: the queue was shut down
func Chain(errs ...error) error { return &chain{errs: errs} }

type chain struct{ errs []error }

func (c *chain) Error() string {
	var b strings.Builder
	for i, err := range c.errs {
		msg := err.Error()
		if i > 0 {
			b.WriteString(": ")
			msg = strings.TrimPrefix(msg, prefix)
		}
		b.WriteString(msg)
	}
	return b.String()
}

func (c *chain) Unwrap() []error { return c.errs }
