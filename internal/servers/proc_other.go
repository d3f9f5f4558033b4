//go:build !linux

package servers

import "syscall"

// procAttr runs a server as cred (nil: the current user).
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
