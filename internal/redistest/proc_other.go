//go:build !linux

package redistest

import "syscall"

// procAttr: elsewhere, servers are stopped by Close and t.Cleanup only.
func procAttr() *syscall.SysProcAttr { return nil }
