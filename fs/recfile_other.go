//go:build !unix

package fs

import (
	"errors"
	"os"
	"path/filepath"
)

// openRecordFile opens the record file at path for reading, or for reading
// and writing.
func openRecordFile(path string, write bool) (recordFile, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	return asRecordFile(os.OpenFile(path, flag, 0))
}

// createRecordFile makes the record file at path, which must not exist, and
// opens it for reading and writing.
func createRecordFile(path string, perm os.FileMode) (recordFile, error) {
	return asRecordFile(os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm))
}

// present reports whether name is in dir.
func present(dir, name string) (bool, error) {
	_, err := os.Lstat(filepath.Join(dir, name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, err
}

// linked reports whether the file f, opened at path, is still the file at
// path (the first file of a record is removed only with the record).
func linked(f recordFile, path string) (bool, error) {
	a, err := f.(*os.File).Stat()
	if err != nil {
		return false, err
	}
	b, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil && os.SameFile(a, b), err
}

// asRecordFile returns f as a recordFile, nil (not a nil *os.File) on error.
func asRecordFile(f *os.File, err error) (recordFile, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}
