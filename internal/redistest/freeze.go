package redistest

import (
	"fmt"
	"testing"
)

// Freeze stops the server's process (SIGSTOP) without killing it, as a
// stalled host, a stopped VM or a long pause of the process would: open
// connections stay open, the kernel still accepts new ones and keeps what
// clients send, but nothing is answered until Thaw. Commands sent meanwhile
// are then executed, late, in the order the server reads its connections,
// including those of connections the clients have closed since. Close and
// Stop kill a frozen server too. It fails the test where processes cannot
// be stopped (Windows) or when the server is not running.
func (s *Server) Freeze(tb testing.TB) {
	tb.Helper()
	if err := s.signal(sigStop); err != nil {
		tb.Fatal(err)
	}
}

// Thaw resumes a server stopped by Freeze (SIGCONT). It fails the test when
// the server is not running.
func (s *Server) Thaw(tb testing.TB) {
	tb.Helper()
	if err := s.signal(sigCont); err != nil {
		tb.Fatal(err)
	}
}

// signal sends sig to the server's process.
func (s *Server) signal(sig signal) error {
	if sig == nil {
		return fmt.Errorf("redistest: processes cannot be frozen on this system")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("redistest: the server on port %d is not running", s.port)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signal %v to redis-server on port %d: %w", sig, s.port, err)
	}
	return nil
}
