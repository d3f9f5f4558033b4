package zkstore

import (
	"net"
	"testing"
	"time"
)

// deadlineConn records the deadlines set on it and reads what it is given.
type deadlineConn struct {
	net.Conn
	read, write time.Time
	data        []byte
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error  { c.read = t; return nil }
func (c *deadlineConn) SetWriteDeadline(t time.Time) error { c.write = t; return nil }
func (c *deadlineConn) SetDeadline(t time.Time) error      { c.read, c.write = t, t; return nil }
func (c *deadlineConn) Read(p []byte) (int, error) {
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}

// TestHandshakeDeadlines: until the first answer, go-zookeeper's deadlines
// are cut to a tenth of their distance (its read timeout); the zero time
// stays; after the answer they pass unchanged.
func TestHandshakeDeadlines(t *testing.T) {
	now := time.Unix(1000, 0)
	inner := &deadlineConn{data: append([]byte{0, 0, 0, 36}, make([]byte, 36)...)}
	c := &handshakeConn{Conn: inner, now: func() time.Time { return now }}

	recv := 20 * time.Second // go-zookeeper's read timeout for a 30 s session
	_ = c.SetWriteDeadline(now.Add(10 * recv))
	if want := now.Add(recv); !inner.write.Equal(want) {
		t.Errorf("handshake write deadline %v from now, want %v", inner.write.Sub(now), recv)
	}
	_ = c.SetReadDeadline(now.Add(10 * recv))
	if want := now.Add(recv); !inner.read.Equal(want) {
		t.Errorf("handshake read deadline %v from now, want %v", inner.read.Sub(now), recv)
	}
	_ = c.SetDeadline(now.Add(10 * recv))
	if want := now.Add(recv); !inner.read.Equal(want) || !inner.write.Equal(want) {
		t.Errorf("handshake deadlines %v, %v from now, want %v", inner.read.Sub(now), inner.write.Sub(now), recv)
	}
	_ = c.SetWriteDeadline(time.Time{})
	if !inner.write.IsZero() {
		t.Errorf("no write deadline became %v", inner.write)
	}

	// The answer's length, then go-zookeeper clears the read deadline and
	// reads the body: the handshake's deadline stays until it is whole.
	_ = c.SetReadDeadline(now.Add(10 * recv))
	if n, _ := c.Read(make([]byte, 4)); n != 4 {
		t.Fatalf("read %d bytes, want 4", n)
	}
	_ = c.SetReadDeadline(time.Time{})
	if want := now.Add(recv); !inner.read.Equal(want) {
		t.Errorf("read deadline cleared before the answer's body: %v from now, want %v", inner.read.Sub(now), recv)
	}
	if n, _ := c.Read(make([]byte, 20)); n != 20 {
		t.Fatalf("read %d bytes, want 20", n)
	}
	_ = c.SetReadDeadline(now.Add(10 * recv))
	if want := now.Add(recv); !inner.read.Equal(want) {
		t.Errorf("read deadline with 16 bytes of the answer to come: %v from now, want %v", inner.read.Sub(now), recv)
	}
	if n, _ := c.Read(make([]byte, 16)); n != 16 {
		t.Fatalf("read %d bytes, want 16", n)
	}
	_ = c.SetReadDeadline(time.Time{})
	if !inner.read.IsZero() {
		t.Errorf("no deadline after the answer became %v", inner.read)
	}
	later := now.Add(recv)
	_ = c.SetReadDeadline(later)
	if !inner.read.Equal(later) {
		t.Errorf("read deadline after the answer %v from now, want %v", inner.read.Sub(now), recv)
	}
	_ = c.SetWriteDeadline(later)
	if !inner.write.Equal(later) {
		t.Errorf("write deadline after the answer %v from now, want %v", inner.write.Sub(now), recv)
	}
}
