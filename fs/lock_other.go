//go:build !unix

package fs

import "os"

// tryLock always succeeds where advisory locks are not available: on such
// systems only one process may write or restore a directory at a time.
func tryLock(interface{ Fd() uintptr }) (bool, error) { return true, nil }

func unlock(interface{ Fd() uintptr }) error { return nil }

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
