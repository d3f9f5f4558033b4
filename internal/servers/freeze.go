package servers

import "fmt"

// Freeze stops the server and the processes it started (SIGSTOP to its
// process group: PostgreSQL's backends with their postmaster) without
// killing them, as a stalled host or a stopped VM would: open connections
// stay open, the kernel still accepts new ones and keeps what clients send,
// but nothing is answered until Thaw. Stop and Close kill a frozen server
// too. It fails where processes cannot be stopped (not Linux) or when the
// server is not running.
func (p *Process) Freeze() error { return p.signal(true) }

// Thaw resumes a server stopped by Freeze (SIGCONT).
func (p *Process) Thaw() error { return p.signal(false) }

func (p *Process) signal(stop bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("servers: %s on port %d is not running", p.spec.Name, p.Port(0))
	}
	if err := signalGroup(p.cmd.Process, stop); err != nil {
		return fmt.Errorf("servers: freeze or thaw %s on port %d: %w", p.spec.Name, p.Port(0), err)
	}
	return nil
}
