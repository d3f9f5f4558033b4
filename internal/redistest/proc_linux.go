package redistest

import "syscall"

// procAttr makes the kernel kill redis-server when the test binary dies
// (a panic, a timeout, a kill), so that no server outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
