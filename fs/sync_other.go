//go:build !linux

package fs

import "os"

// datasync flushes f's data and metadata.
func datasync(f *os.File) error { return f.Sync() }
