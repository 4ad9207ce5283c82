//go:build unix && !linux

package childproc

import (
	"os"
	"syscall"
)

// StopSelf stops this process (SIGSTOP). Without a signal to the calling
// thread (Linux's tgkill), the caller may run on a little before the
// process stops.
func StopSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
}
