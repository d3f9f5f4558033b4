package history

import (
	"os"
	"syscall"
)

// The signals that freeze, thaw and kill a worker.
var sigStop, sigCont, sigKill os.Signal = syscall.SIGSTOP, syscall.SIGCONT, syscall.SIGKILL

// procAttr makes a worker die with the test binary.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
