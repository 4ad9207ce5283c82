package main

import (
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// stopSupported says whether fault points can stop a child (SIGSTOP) and
// see it stopped: waitid with WSTOPPED.
const stopSupported = true

// whenStopped waits until the child p stops itself (SIGSTOP, a fault point's
// "STOP") or ends. If it stopped, it runs during while the child stays
// stopped, then continues the child, and reports true.
func whenStopped(t *testing.T, p *os.Process, during func()) bool {
	t.Helper()
	var info unix.Siginfo
	for {
		// WNOWAIT leaves an exit for exec.Cmd.Wait to collect.
		err := unix.Waitid(unix.P_PID, p.Pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("waitid %d: %v", p.Pid, err)
		}
		break
	}
	const cldStopped = 5 // CLD_STOPPED
	if info.Code != cldStopped {
		return false
	}
	// Consume the stop, so that a later wait sees the next event.
	_ = unix.Waitid(unix.P_PID, p.Pid, &info, unix.WSTOPPED, nil)
	during()
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("continue the child: %v", err)
	}
	return true
}
