//go:build !linux

package childproc

import "os/exec"

// DieWithParent is a no-op where the kernel cannot tie a child's life to
// its parent's.
func DieWithParent(*exec.Cmd) {}
