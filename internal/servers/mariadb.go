package servers

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// MariaDBUser is the account of the servers that StartMariaDB starts: root,
// without a password, from 127.0.0.1.
const MariaDBUser = "root"

// MariaDBSpec describes a MariaDB server (MySQL's protocol and SQL):
// mariadb-install-db into the process's directory, then mariadbd listening
// on 127.0.0.1 only, its socket in the same directory, without the
// configuration files of the system (--no-defaults), without binary log and
// with InnoDB writing its log at each commit but not flushing it (a killed
// server keeps what it committed; nothing outlives the test). When the tests
// run as root the server runs as the system user mysql.
func MariaDBSpec() Spec {
	return Spec{
		Name:       "mariadb",
		Binary:     "mariadbd",
		Candidates: []string{"/usr/sbin/mariadbd", "mysqld", "/usr/sbin/mysqld"},
		Package:    "mariadb-server",
		User:       "mysql",
		Setup: func(p *Process) error {
			install, err := mariadbInstallDB(p.path)
			if err != nil {
				return err
			}
			out, err := p.Command(install, "--no-defaults", "--datadir="+mariadbData(p),
				"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", filepath.Base(install), err, out)
			}
			return nil
		},
		Args: func(p *Process) []string {
			return []string{
				"--no-defaults", // must come first
				"--datadir=" + mariadbData(p),
				"--port=" + strconv.Itoa(p.Port(0)),
				"--bind-address=127.0.0.1",
				"--skip-networking=0",
				"--skip-name-resolve",
				"--socket=" + filepath.Join(p.Dir(), "mysqld.sock"),
				"--pid-file=" + filepath.Join(p.Dir(), "mysqld.pid"),
				"--innodb-flush-log-at-trx-commit=2",
				"--innodb-doublewrite=0",
				"--innodb-buffer-pool-size=64M",
				"--max-connections=500",
			}
		},
		Ready: mariadbReady,
	}
}

// StartMariaDB starts a MariaDB server for the test (see MariaDBSpec) and
// stops it when the test ends. Connect as MariaDBUser to its Addr (or a
// proxy's), e.g. with the DSN "root@tcp(" + addr + ")/".
func StartMariaDB(tb testing.TB) *Process {
	tb.Helper()
	return Start(tb, MariaDBSpec())
}

func mariadbData(p *Process) string { return filepath.Join(p.Dir(), "data") }

// mariadbInstallDB finds the script that creates the system tables, which
// the server's package installs in PATH.
func mariadbInstallDB(server string) (string, error) {
	for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
		if path, err := exec.LookPath(name); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("%w: mariadb-install-db (for %s) was not found; install it (Debian/Ubuntu: apt-get install mariadb-server)", ErrNotInstalled, server)
}

// mariadbReady reads the first packet the server sends on a new connection:
// a handshake (protocol version 10) once it accepts clients, an error packet
// (0xff) otherwise. MariaDB listens only after its storage engines are up.
func mariadbReady(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	var head [4]byte // payload length (3 bytes, little endian), sequence number
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
	if n == 0 {
		return errors.New("mariadb: empty first packet")
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	switch body[0] {
	case 10:
		return nil
	case 0xff: // error packet: code (2 bytes), then the message
		if len(body) >= 3 {
			return fmt.Errorf("mariadb: error %d: %s", binary.LittleEndian.Uint16(body[1:3]), body[3:])
		}
		return errors.New("mariadb: error packet")
	default:
		return fmt.Errorf("mariadb: unexpected protocol version %d", body[0])
	}
}
