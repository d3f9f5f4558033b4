package zkstore

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// handshakeShare is the part of go-zookeeper's handshake deadline that Dial
// keeps: go-zookeeper (v1) gives the answer to a connect request ten times
// its read timeout, and every later answer the read timeout itself.
const handshakeShare = 10

// Dial is a zk.Dialer that bounds the wait for a server's answer to the
// connect request (the handshake) by go-zookeeper's read timeout, two
// thirds of the session timeout, the bound of every later answer. Give it
// to zk.Connect with the HostProvider:
//
//	conn, _, err := zk.Connect(servers, 10*time.Second,
//		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
//
// go-zookeeper waits ten times the read timeout for that answer, longer
// than the session itself: a server that took the connection and never
// answers keeps the client off every other server until its session has
// expired, and its locks with it. ZooKeeper 3.8.0 does this to a connection
// that arrives while it starts: it fails to close it (a
// NullPointerException in its clean-up) and leaves it open, unanswered; a
// client that reconnected at that moment, after a restart, waited 200 s
// with a 30 s session. With Dial it gives that server up after 20 s and
// dials again.
func Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: c, now: time.Now}, nil
}

var _ zk.Dialer = Dial

// handshakeConn is a connection whose deadlines, until the whole answer to
// the connect request was read, are a tenth of those go-zookeeper asks for
// (see Dial). go-zookeeper clears the read deadline once it has the answer's
// 4-byte length and reads the rest with none: until that rest has come, a
// cleared read deadline is replaced by the last one set.
type handshakeConn struct {
	net.Conn
	now func() time.Time

	mu       sync.Mutex
	answered bool      // the whole answer was read: the handshake is over
	header   []byte    // the answer's length, as far as read
	left     int       // the bytes of the answer's body still to read, once header is whole
	readBy   time.Time // the last read deadline set during the handshake
}

// SetReadDeadline sets the read deadline, shortened during the handshake,
// where no deadline keeps the last one.
func (c *handshakeConn) SetReadDeadline(t time.Time) error {
	t = c.bound(t)
	c.mu.Lock()
	if !c.answered {
		if t.IsZero() {
			t = c.readBy
		} else {
			c.readBy = t
		}
	}
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline, shortened during the
// handshake.
func (c *handshakeConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.bound(t))
}

// SetDeadline sets both deadlines, as SetReadDeadline and SetWriteDeadline
// do.
func (c *handshakeConn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}

// Read reads from the connection and notes the handshake's end once the
// whole answer (a 4-byte big-endian length, then that many bytes) was read.
func (c *handshakeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if !c.answered {
			c.consume(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

// consume counts b, read during the handshake, towards the whole answer.
func (c *handshakeConn) consume(b []byte) {
	if need := 4 - len(c.header); need > 0 {
		k := min(need, len(b))
		c.header = append(c.header, b[:k]...)
		b = b[k:]
		if len(c.header) < 4 {
			return
		}
		c.left = int(binary.BigEndian.Uint32(c.header))
	}
	c.left -= len(b)
	if c.left <= 0 {
		c.answered = true
	}
}

// bound returns the deadline t, or during the handshake one a tenth as far
// away. The zero time (no deadline) stays.
func (c *handshakeConn) bound(t time.Time) time.Time {
	c.mu.Lock()
	answered := c.answered
	c.mu.Unlock()
	if answered || t.IsZero() {
		return t
	}
	now := c.now()
	return now.Add(t.Sub(now) / handshakeShare)
}
