//go:build !unix

package redistest

import "os"

type signal = os.Signal

// Processes cannot be stopped and resumed here: Freeze and Thaw fail.
var sigStop, sigCont signal
