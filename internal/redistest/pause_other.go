//go:build !unix

package redistest

import "errors"

var errNoPause = errors.New("redistest: Pause and Resume need SIGSTOP and SIGCONT (unix only)")

// Pause freezes the server's process; only on unix (see the unix version).
func (s *Server) Pause() error { return errNoPause }

// Resume thaws a server frozen by Pause; only on unix.
func (s *Server) Resume() error { return errNoPause }
