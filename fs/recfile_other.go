//go:build !unix

package fs

import "os"

// openRecordFile opens the record file at path for reading, or for reading
// and writing.
func openRecordFile(path string, write bool) (recordFile, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	return asRecordFile(os.OpenFile(path, flag, 0))
}

// openDir opens the directory at path to lock it.
func openDir(path string) (recordFile, error) { return asRecordFile(os.Open(path)) }

// asRecordFile returns f as a recordFile, nil (not a nil *os.File) on error.
func asRecordFile(f *os.File, err error) (recordFile, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}
