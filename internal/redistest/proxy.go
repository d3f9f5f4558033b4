package redistest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one target address, with
// faults under the caller's control: a delay added to every forwarded chunk
// (simulated network latency), a cut (connections dropped and new ones
// refused, as when the server's host goes away) and a black hole (nothing
// forwarded but nothing closed either, as in a network partition, so that
// calls hang until their timeouts).
//
// It is not tied to tests: benchmarks use it to give every client the same
// simulated round trip. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	delay     atomic.Int64 // nanoseconds, per chunk and direction
	accepted  atomic.Int64
	refused   atomic.Int64
	up        atomic.Int64 // bytes client → target
	down      atomic.Int64 // bytes target → client
	exchanges atomic.Int64 // request/response turns, see Stats.Exchanges

	mu     sync.Mutex
	mode   proxyMode
	conns  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
}

type proxyMode int

const (
	forwarding proxyMode = iota
	cut
	blackhole
)

// StartProxy listens on a random loopback port and forwards every connection
// to target. The caller must Close it.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// NewProxy starts a Proxy in front of target for the test and closes it when
// the test ends; it fails the test when the proxy cannot listen.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := StartProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's "127.0.0.1:port", the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetDelay makes the proxy hold every chunk of bytes it forwards for d before
// passing it on, in each direction, so that a request and its reply gain 2×d:
// SetDelay(500*time.Microsecond) simulates a 1 ms round trip. Chunks keep
// their order and are delayed, not throttled: throughput is unchanged. Zero
// turns the delay off; a negative d counts as zero.
func (p *Proxy) SetDelay(d time.Duration) {
	p.delay.Store(int64(max(d, 0)))
}

// Delay returns the delay set with SetDelay.
func (p *Proxy) Delay() time.Duration { return time.Duration(p.delay.Load()) }

// Cut drops every open connection and refuses new ones (accepted and closed
// at once, so that clients see a reset rather than a hang) until Restore.
func (p *Proxy) Cut() { p.setMode(cut) }

// Blackhole stops forwarding without closing anything: bytes sent either way
// are swallowed and new connections are accepted but never answered, until
// Restore. Calls through the proxy then hang until their own timeouts, as in
// a network partition.
func (p *Proxy) Blackhole() { p.setMode(blackhole) }

// Restore forwards again. Connections that were black-holed are closed, as
// their byte streams have lost data; clients reconnect.
func (p *Proxy) Restore() { p.setMode(forwarding) }

func (p *Proxy) setMode(m proxyMode) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	prev := p.mode
	p.mode = m
	var drop []*link
	if m == cut || (m == forwarding && prev == blackhole) {
		for l := range p.conns {
			drop = append(drop, l)
		}
	}
	p.mu.Unlock()
	for _, l := range drop {
		l.close()
	}
}

// Stats counts the proxy's traffic since it started.
type Stats struct {
	Accepted  int64 // connections accepted and forwarded (or black-holed)
	Refused   int64 // connections closed on arrival because of Cut
	Active    int64 // connections open now
	BytesUp   int64 // bytes forwarded from clients to the target
	BytesDown int64 // bytes forwarded from the target to clients
	// Exchanges counts the round trips the proxy saw, whatever the
	// protocol: on each connection, a turn of the conversation in which the
	// client sends bytes after the target has (or first). A request and its
	// reply are one exchange, however many chunks each takes. Requests that
	// a client sends on one connection before the replies come back
	// (pipelined, or multiplexed from several goroutines) share an
	// exchange; a request sent after a message pushed by the target (pub/sub,
	// a watch event, a keep-alive) starts one.
	Exchanges int64
}

// Stats returns the traffic counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := int64(len(p.conns))
	p.mu.Unlock()
	return Stats{
		Accepted:  p.accepted.Load(),
		Refused:   p.refused.Load(),
		Active:    active,
		BytesUp:   p.up.Load(),
		BytesDown: p.down.Load(),
		Exchanges: p.exchanges.Load(),
	}
}

// Close stops listening, drops every connection and waits for the proxy's
// goroutines to end. It is idempotent.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var drop []*link
	for l := range p.conns {
		drop = append(drop, l)
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, l := range drop {
		l.close()
	}
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.mu.Lock()
		mode, closed := p.mode, p.closed
		p.mu.Unlock()
		if closed || mode == cut {
			p.refused.Add(1)
			_ = c.Close()
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// link is one proxied connection: the client's side and the target's.
type link struct {
	client, server net.Conn
	once           sync.Once
	// clientSpoke is set when the client's bytes were the last to arrive,
	// cleared when the target's were: a chunk from the client that finds
	// it clear starts an exchange.
	clientSpoke atomic.Bool
}

func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		if l.server != nil {
			_ = l.server.Close()
		}
	})
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server}
	p.mu.Lock()
	if p.closed || p.mode == cut {
		p.mu.Unlock()
		l.close()
		return
	}
	p.conns[l] = struct{}{}
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, server, client, true) }()
	go func() { defer wg.Done(); p.pipe(l, client, server, false) }()
	wg.Wait()
	l.close()
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

// chunk is a piece of the byte stream and when it may be passed on.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst through a queue, so that each chunk waits out the
// delay on its own while the next ones are read: latency, not throttling.
// up is the client's direction.
func (p *Proxy) pipe(l *link, dst, src net.Conn, up bool) {
	count := &p.down
	if up {
		count = &p.up
	}
	queue := make(chan chunk, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		for c := range queue {
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			p.mu.Lock()
			mode := p.mode
			p.mu.Unlock()
			if mode != forwarding {
				continue // swallowed
			}
			if _, err := dst.Write(c.data); err != nil {
				l.close()
				for range queue { // drain until the reader stops
				}
				return
			}
			count.Add(int64(len(c.data)))
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if up {
				if !l.clientSpoke.Swap(true) {
					p.exchanges.Add(1)
				}
			} else {
				l.clientSpoke.Store(false)
			}
			data := make([]byte, n)
			copy(data, buf[:n])
			queue <- chunk{data: data, due: time.Now().Add(time.Duration(p.delay.Load()))}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.close()
			}
			break
		}
	}
	close(queue)
	wg.Wait()
	// Half-close is not propagated: Redis clients never half-close, and a
	// full close makes both sides see the end.
	l.close()
}
