package main

import (
	"errors"
	"io"
)

// benchRestore is filled in with the Restorer.
func benchRestore(io.Writer, *options, [][]byte) error {
	return errors.New("restore benchmark: not built yet")
}
