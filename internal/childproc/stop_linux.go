package childproc

import (
	"runtime"
	"syscall"
)

// StopSelf stops this process (SIGSTOP), as a GC pause or a VM migration
// would, and returns only once it is continued (SIGCONT). kill(2) of its
// own process does not do that: the kernel has some thread of the process
// take the signal, often another one, and the calling thread runs on until
// that one has stopped them all; on a loaded machine the caller had written
// a record past the point it was to stop at (issue 30). A signal to the
// calling thread itself (tgkill) stops it on its way out of the call, and
// the whole process with it.
func StopSelf() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = syscall.Tgkill(syscall.Getpid(), syscall.Gettid(), syscall.SIGSTOP)
}
