//go:build !linux

package history

import (
	"os"
	"syscall"
)

// Processes cannot be frozen here: Suite skips.
var sigStop, sigCont, sigKill os.Signal = nil, nil, os.Kill

func procAttr() *syscall.SysProcAttr { return nil }
