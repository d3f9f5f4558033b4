package servers

import "syscall"

// procAttr runs a server as cred (nil: the current user) and makes the
// kernel kill it when the test binary dies, so that no server outlives its
// test.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
}
