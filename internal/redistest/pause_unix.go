//go:build unix

package redistest

import (
	"fmt"
	"syscall"
)

// Pause freezes the server's process with SIGSTOP, as a stalled host or a
// stopped VM would: its connections stay open and its port keeps accepting
// (the kernel completes the handshakes), but nothing is answered and no key
// expires until Resume. Commands sent meanwhile run when it resumes. Pause
// and Resume of a stopped server are errors; Stop and Close kill a paused
// server as they kill a running one.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume thaws a server frozen by Pause (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redistest: %v of the server on port %d: it is not running", sig, s.port)
	}
	if err := syscall.Kill(s.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("redistest: %v of the server on port %d: %w", sig, s.port, err)
	}
	return nil
}
