//go:build unix

package redistest

import (
	"os"
	"syscall"
)

type signal = os.Signal

// The signals of Freeze and Thaw.
var sigStop, sigCont signal = syscall.SIGSTOP, syscall.SIGCONT
