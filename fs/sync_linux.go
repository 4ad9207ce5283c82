package fs

import (
	"os"
	"syscall"
)

// datasync flushes f's data and the metadata needed to read it back.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// syncRecordFile flushes a record file's data and the metadata needed to read
// it back.
func syncRecordFile(f recordFile) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
