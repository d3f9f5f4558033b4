//go:build !unix

package scale

import "time"

// processCPU is not measured here: the reports leave client CPU out.
func processCPU() time.Duration { return 0 }
