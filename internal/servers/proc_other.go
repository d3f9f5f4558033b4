//go:build !linux

package servers

import (
	"errors"
	"os"
	"syscall"
)

// procAttr runs a server as cred (nil: the current user).
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// ListensOn cannot tell which process listens on a port here: it reports
// nothing.
func ListensOn(pid, port int) error { return nil }

// killGroup kills the server.
func killGroup(p *os.Process) { _ = p.Kill() }

// waitGroupGone does nothing here.
func waitGroupGone(pgid int) {}

// signalGroup cannot stop processes here.
func signalGroup(p *os.Process, stop bool) error {
	return errors.New("processes cannot be frozen on this system")
}
