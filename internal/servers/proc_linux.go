package servers

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procAttr runs a server as cred (nil: the current user), in a process
// group of its own (see killGroup), and makes the kernel kill it when the
// test binary dies, so that no server outlives its test.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred, Setpgid: true}
}

// killGroup kills the server's process group: the server and the processes
// it started.
func killGroup(p *os.Process) {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		_ = p.Kill()
	}
}

// waitGroupGone waits, up to 10 s, until no live process is left in the
// process group pgid (zombies, which hold nothing, are left to their
// parent).
func waitGroupGone(pgid int) {
	deadline := time.Now().Add(10 * time.Second)
	for groupAlive(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupAlive reports whether a process that is not a zombie is in the
// process group pgid, as /proc tells.
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(fields[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// ListensOn reports an error when the process pid does not hold a TCP
// socket listening on port: something else answered there. It reads
// /proc; when /proc cannot tell (not mounted, another user's process), it
// reports nothing.
func ListensOn(pid, port int) error {
	inodes, err := listeningInodes(port)
	if err != nil {
		return nil
	}
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return nil
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if err != nil {
			continue
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return nil
		}
	}
	return fmt.Errorf("another program listens on port %d (taken between the probe and the server's start)", port)
}

// listeningInodes returns the inodes of the TCP sockets (IPv4 and IPv6)
// listening on port.
func listeningInodes(port int) (map[string]bool, error) {
	inodes := make(map[string]bool)
	want := fmt.Sprintf(":%04X", port)
	read := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		read++
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
				continue
			}
			inodes[fields[9]] = true
		}
		f.Close()
	}
	if read == 0 {
		return nil, fmt.Errorf("servers: no /proc/net/tcp")
	}
	return inodes, nil
}

// signalGroup stops (SIGSTOP) or resumes (SIGCONT) the server's process
// group.
func signalGroup(p *os.Process, stop bool) error {
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	return syscall.Kill(-p.Pid, sig)
}
