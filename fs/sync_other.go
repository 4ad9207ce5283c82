//go:build !linux

package fs

import "os"

// datasync flushes f's data and metadata.
func datasync(f *os.File) error { return f.Sync() }

// syncRecordFile flushes a record file's data and metadata.
func syncRecordFile(f recordFile) error {
	return f.(interface{ Sync() error }).Sync()
}
