//go:build unix

package fs

import (
	"errors"
	"io"
	"os"
	"syscall"
)

// rawFile is an open file used through its descriptor alone. Opening and
// closing an *os.File costs about three times more here (a stat, and trying
// the poller), which a checkpoint per block of a restore pays for the record
// file it locks.
type rawFile struct {
	fd   int
	path string
}

// openRaw opens path with flag (O_CLOEXEC is added).
func openRaw(path string, flag int) (*rawFile, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return &rawFile{fd: fd, path: path}, nil
	}
}

// openRecordFile opens the record file at path for reading, or for reading
// and writing.
func openRecordFile(path string, write bool) (recordFile, error) {
	flag := syscall.O_RDONLY
	if write {
		flag = syscall.O_RDWR
	}
	return asRecordFile(openRaw(path, flag))
}

// createRecordFile makes the record file at path, which must not exist, and
// opens it for reading and writing.
func createRecordFile(path string, perm os.FileMode) (recordFile, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "create", Path: path, Err: err}
		}
		return &rawFile{fd: fd, path: path}, nil
	}
}

// present reports whether name is in dir.
func present(dir, name string) (bool, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Lstat(dir+string(os.PathSeparator)+name, &st)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.ENOENT):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, &os.PathError{Op: "lstat", Path: dir + string(os.PathSeparator) + name, Err: err}
	}
}

// linked reports whether the file f, opened at path, still has a name (the
// first file of a record is removed only with the record).
func linked(f recordFile, _ string) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false, err
	}
	return st.Nlink > 0, nil
}

// asRecordFile returns f as a recordFile, nil (not a nil *rawFile) on error.
func asRecordFile(f *rawFile, err error) (recordFile, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (f *rawFile) Fd() uintptr { return uintptr(f.fd) }

// ReadAt reads len(b) bytes at off, as os.File.ReadAt does: fewer only at
// the end of the file (io.EOF) or on an error.
func (f *rawFile) ReadAt(b []byte, off int64) (int, error) {
	return f.whole("read", syscall.Pread, b, off, io.EOF)
}

// WriteAt writes b at off, as os.File.WriteAt does.
func (f *rawFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.whole("write", syscall.Pwrite, b, off, io.ErrShortWrite)
	if err == io.ErrShortWrite {
		err = &os.PathError{Op: "write", Path: f.path, Err: err}
	}
	return n, err
}

// whole calls op (pread or pwrite) until all of b is done at off, retrying
// on EINTR; a call that does nothing ends it with atEnd.
func (f *rawFile) whole(name string, op func(int, []byte, int64) (int, error), b []byte, off int64, atEnd error) (n int, err error) {
	for n < len(b) {
		m, err := op(f.fd, b[n:], off+int64(n))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: name, Path: f.path, Err: err}
		}
		if m == 0 {
			return n, atEnd
		}
		n += m
	}
	return n, nil
}

// Sync flushes the file's data and metadata (fsync).
func (f *rawFile) Sync() error {
	for {
		err := syscall.Fsync(f.fd)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil {
				return &os.PathError{Op: "fsync", Path: f.path, Err: err}
			}
			return nil
		}
	}
}

// Close closes the descriptor; it is not retried on EINTR, which on Linux
// has closed it already.
func (f *rawFile) Close() error {
	if err := syscall.Close(f.fd); err != nil {
		return &os.PathError{Op: "close", Path: f.path, Err: err}
	}
	return nil
}
