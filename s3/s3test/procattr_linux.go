package s3test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a started server exit when this process dies, even by
// a test timeout's panic or a kill.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
