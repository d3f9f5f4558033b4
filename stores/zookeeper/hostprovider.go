package zkstore

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// The pauses of a HostProvider.
const (
	// reconnectMinDelay is the pause after the first round of servers that
	// failed; each further failed round doubles it, up to reconnectMaxDelay.
	reconnectMinDelay = 50 * time.Millisecond
	reconnectMaxDelay = 250 * time.Millisecond
	// reconnectFailAfter is how long the servers may stay out of reach
	// before go-zookeeper is let take its one-second pause, in which it
	// fails the requests not yet sent and notices a Close.
	reconnectFailAfter = 3 * time.Second
)

// HostProvider is a zk.HostProvider that reconnects soon after a ZooKeeper
// server comes back. Give each connection its own:
//
//	conn, _, err := zk.Connect(servers, 10*time.Second,
//		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
//
// go-zookeeper's default provider pauses for a second after every round of
// servers that all failed (with one server: before every attempt, the first
// after a broken connection included), so a lock stays out of reach for up
// to a second after its server restarted or its ensemble elected a leader.
// HostProvider tries the servers in the same order (addresses resolved
// once and shuffled) but pauses itself, so that refused dials do not spin:
// not after the first round after a session broke, then 50 ms, doubling up
// to 250 ms (each pause taken at random between half and all of it, so that
// clients do not dial in step).
//
// go-zookeeper fails the requests waiting to be sent (zk.ErrNoServer), and
// notices a Close, only in its own pause. HostProvider lets it pause once
// the servers have been out of reach for 3 s, and 3 s after each such
// pause: while no server answers, requests wait for one for about 3 s
// (1 s with the default provider), and a connection closed meanwhile stops
// dialing within about 3 s. The pauses are taken in Next, which
// go-zookeeper calls holding the lock of zk.Conn.Server.
//
// The zero value is ready to use.
type HostProvider struct {
	servers zk.DNSHostProvider // resolves the addresses and takes turns

	mu        sync.Mutex
	connected bool      // a session was established since the last Next
	fresh     bool      // the round under way began after a connection broke
	failed    uint      // failed rounds that doubled the pause
	since     time.Time // when the servers went out of reach, or go-zookeeper's last pause ended

	// Tests set these; nil: the time package's and math/rand's.
	sleep func(time.Duration)
	now   func() time.Time
	rand  func(n int64) int64 // in [0, n)
}

var _ zk.HostProvider = (*HostProvider)(nil)

// NewHostProvider returns a HostProvider for one connection.
func NewHostProvider() *HostProvider { return new(HostProvider) }

// Init resolves the servers' addresses and shuffles them; zk.Connect calls
// it first.
func (p *HostProvider) Init(servers []string) error {
	if err := p.servers.Init(servers); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connected, p.fresh, p.failed, p.since = false, false, 0, p.clock()
	return nil
}

// Len returns the number of the servers' addresses.
func (p *HostProvider) Len() int { return p.servers.Len() }

// Next returns the next server to dial, after a pause if it completes a
// round of servers that all failed (see HostProvider). It reports
// retryStart, which makes go-zookeeper fail the requests not yet sent and
// pause for a second, only when the servers have been out of reach for 3 s
// since the outage began or go-zookeeper last paused.
func (p *HostProvider) Next() (server string, retryStart bool) {
	server, roundDone := p.servers.Next()
	p.mu.Lock()
	if p.connected { // the connection broke: a new outage
		p.connected, p.fresh, p.failed, p.since = false, true, 0, p.clock()
	}
	if !roundDone {
		p.mu.Unlock()
		return server, false
	}
	if p.fresh { // the first round after a broken session: no pause
		p.fresh = false
		p.mu.Unlock()
		return server, false
	}
	if now := p.clock(); now.Sub(p.since) >= reconnectFailAfter {
		p.since = now.Add(time.Second) // go-zookeeper pauses for a second now
		p.mu.Unlock()
		return server, true
	}
	delay := min(reconnectMinDelay<<p.failed, reconnectMaxDelay)
	if delay < reconnectMaxDelay {
		p.failed++
	}
	p.mu.Unlock()
	p.pause(delay/2 + time.Duration(p.random(int64(delay/2)+1)))
	return server, false
}

// Connected notes that a session was established with the server Next
// returned last: no pause before the next round.
func (p *HostProvider) Connected() {
	p.servers.Connected()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connected = true
}

func (p *HostProvider) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *HostProvider) pause(d time.Duration) {
	if p.sleep != nil {
		p.sleep(d)
		return
	}
	time.Sleep(d)
}

func (p *HostProvider) random(n int64) int64 {
	if p.rand != nil {
		return p.rand(n)
	}
	return rand.Int64N(n)
}
