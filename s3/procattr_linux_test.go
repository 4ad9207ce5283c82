package s3_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the started server exit when the test binary dies,
// even by a timeout's panic or a kill.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
