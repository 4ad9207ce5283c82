// Package childproc ties the life of the processes tests and tools start
// (a local S3 server, restorers and runners to kill) to their parent's.
package childproc

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd, once started, exit when this process dies, even
// by a test timeout's panic or a kill, instead of running on orphaned.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
