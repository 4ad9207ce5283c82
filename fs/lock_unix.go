//go:build unix

package fs

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive advisory lock on f without waiting. ok is false
// when another open file description holds it. The lock goes away when f is
// closed or its process dies, however it dies.
func tryLock(f interface{ Fd() uintptr }) (ok bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// unlock releases the lock taken by tryLock.
func unlock(f interface{ Fd() uintptr }) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// sameFile reports whether f is still the file at path.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
