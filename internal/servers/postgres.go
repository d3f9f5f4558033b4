package servers

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PostgresUser is the superuser of the servers that StartPostgres starts;
// it connects without a password from loopback (trust authentication), to
// the database "postgres".
const PostgresUser = "postgres"

// PostgresSpec describes a PostgreSQL server: initdb into the process's
// directory as the system user postgres (PostgreSQL refuses to run as root),
// then postgres listening on 127.0.0.1 only, its Unix socket in the same
// directory, without fsync (nothing outlives the test). The binaries are
// found in PATH or under /usr/lib/postgresql/<version>/bin (Debian's layout,
// the newest version first).
func PostgresSpec() Spec {
	return Spec{
		Name:       "postgres",
		Binary:     "postgres",
		Candidates: postgresCandidates(),
		Package:    "postgresql",
		User:       "postgres",
		Setup: func(p *Process) error {
			initdb := filepath.Join(filepath.Dir(p.path), "initdb")
			out, err := p.Command(initdb, "-D", postgresData(p), "-U", PostgresUser,
				"-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput()
			if err != nil {
				return fmt.Errorf("initdb: %w\n%s", err, out)
			}
			return nil
		},
		Args: func(p *Process) []string {
			return []string{
				"-D", postgresData(p),
				"-p", strconv.Itoa(p.Port(0)),
				"-k", p.Dir(),
				"-c", "listen_addresses=127.0.0.1",
				"-c", "fsync=off",
				"-c", "full_page_writes=off",
			}
		},
		Ready: postgresReady,
	}
}

// StartPostgres starts a PostgreSQL server for the test (see PostgresSpec)
// and stops it when the test ends. PostgresURL gives the address to connect
// to.
func StartPostgres(tb testing.TB) *Process {
	tb.Helper()
	return Start(tb, PostgresSpec())
}

// PostgresURL returns the connection URL of the database "postgres" as
// PostgresUser at addr (the server's Addr, or a proxy's), without TLS.
func PostgresURL(addr string) string {
	return "postgres://" + PostgresUser + "@" + addr + "/postgres?sslmode=disable"
}

func postgresData(p *Process) string { return filepath.Join(p.Dir(), "data") }

// postgresCandidates lists Debian's postgres binaries (not in PATH), the
// newest version first.
func postgresCandidates() []string {
	paths, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	version := func(path string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
		return v
	}
	slices.SortFunc(paths, func(a, b string) int { return version(b) - version(a) })
	return paths
}

// postgresReady opens a session as PostgresUser the way a client does (the
// frontend/backend protocol's StartupMessage) and reports an error until the
// server answers with ReadyForQuery: a server that accepts connections may
// still be starting up (SQLSTATE 57P03) or recovering.
func postgresReady(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))

	params := "user\x00" + PostgresUser + "\x00database\x00postgres\x00\x00"
	msg := make([]byte, 8, 8+len(params))
	binary.BigEndian.PutUint32(msg[0:], uint32(8+len(params)))
	binary.BigEndian.PutUint32(msg[4:], 3<<16) // protocol 3.0
	msg = append(msg, params...)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 || n > 1<<20 {
			return fmt.Errorf("postgres: bad message length %d", n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		switch head[0] {
		case 'Z': // ReadyForQuery
			_, _ = c.Write([]byte{'X', 0, 0, 0, 4}) // Terminate
			return nil
		case 'E': // ErrorResponse: fields of a type byte and a string
			return errors.New("postgres: " + postgresError(body))
		case 'R': // Authentication: 0 is AuthenticationOk, anything else a request
			if len(body) < 4 || binary.BigEndian.Uint32(body) != 0 {
				return errors.New("postgres: the server asks for a password; want trust authentication")
			}
		}
	}
}

// postgresError formats the fields of an ErrorResponse.
func postgresError(body []byte) string {
	var code, text string
	for _, field := range strings.Split(string(body), "\x00") {
		if len(field) < 2 {
			continue
		}
		switch field[0] {
		case 'C':
			code = field[1:]
		case 'M':
			text = field[1:]
		}
	}
	return text + " (SQLSTATE " + code + ")"
}
