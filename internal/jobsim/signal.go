package jobsim

import (
	"os"
	"os/signal"
	"syscall"
)

// signalNotify sends SIGINT and SIGTERM to c.
func signalNotify(c chan<- os.Signal) { signal.Notify(c, os.Interrupt, syscall.SIGTERM) }
