//go:build !linux

package childproc

import (
	"os/exec"
	"time"
)

// DieWithParent is a no-op where the kernel cannot tie a child's life to
// its parent's.
func DieWithParent(*exec.Cmd) {}

// CPU returns zero: a process's CPU time is read on Linux only.
func CPU(pid int) time.Duration { return 0 }
