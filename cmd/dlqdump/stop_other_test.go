//go:build unix && !linux

package main

import (
	"os"
	"testing"
)

const stopSupported = false

func whenStopped(t *testing.T, _ *os.Process, _ func()) bool {
	t.Helper()
	t.Skip("stopping a child is tested on Linux")
	return false
}
