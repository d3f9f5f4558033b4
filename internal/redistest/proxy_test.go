package redistest_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/testmain"
)

// leakCheck fails the test if it leaves goroutines behind, once its other
// clean-ups (servers stopped, clients closed) have run.
func leakCheck(t *testing.T) {
	t.Cleanup(func() { noLeaks(t) })
}

// noLeaks fails t if goroutines are left, once those that are ending have
// had testmain.LeakPatience to end.
func noLeaks(t *testing.T) {
	t.Helper()
	if err := testmain.FindLeaks(); err != nil {
		t.Error(err)
	}
}

// restoreAndPing restores p and checks that c gets through again.
func restoreAndPing(t *testing.T, p *redistest.Proxy, c *redis.Client) {
	t.Helper()
	p.Restore()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}
	_ = c.Close()
	p.Close()
}

// proxiedServer starts a server, a proxy in front of it and a client of the
// proxy that has connected once.
func proxiedServer(t *testing.T) (*redistest.Server, *redistest.Proxy, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := proxied(t, p)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return srv, p, c
}

// clientTimeout is the dial and read timeout of proxied's clients: long
// enough for a loaded machine's slow replies, and what a fault that shows
// as a timeout rather than at once would take at least.
const clientTimeout = 5 * time.Second

// proxied returns a client of srv through p that does not retry, so that
// each fault shows in the first call.
func proxied(t *testing.T, p *redistest.Proxy) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: p.Addr(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: clientTimeout, ReadTimeout: clientTimeout, ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestProxyForwardsAndDelays(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := proxied(t, p)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := srv.Client(t).Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("the write through the proxy did not reach the server: %q", got)
	}
	// A round trip of 200 ms: ten of them in a row take 2 s at least,
	// which sets them apart from one on a loaded machine too.
	const delay = 100 * time.Millisecond
	p.SetDelay(delay)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*delay {
		t.Fatalf("a round trip with %v each way took %v", delay, d)
	}
	if p.Delay() != delay {
		t.Fatalf("Delay() = %v", p.Delay())
	}
	// Pipelined commands are delayed, not serialised: ten in flight at once
	// take about one round trip, not ten.
	start = time.Now()
	pipe := c.Pipeline()
	for i := 0; i < 10; i++ {
		pipe.Ping(ctx)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= 10*2*delay {
		t.Fatalf("ten pipelined pings took %v: the delay throttles instead of adding latency", d)
	}
	st := p.Stats()
	if st.Accepted < 1 || st.Active < 1 || st.BytesUp == 0 || st.BytesDown == 0 {
		t.Fatalf("stats = %+v", st)
	}
	_ = c.Close()
	p.Close()
	p.Close() // idempotent
}

func TestProxyCutAndRestore(t *testing.T) {
	leakCheck(t)
	_, p, c := proxiedServer(t)
	ctx := context.Background()
	p.Cut()
	start := time.Now()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through a cut proxy succeeded")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("a new connection through a cut proxy succeeded")
	}
	if d := time.Since(start); d >= clientTimeout {
		t.Fatalf("a cut took %v to show: it should be refused at once, not time out", d)
	}
	if p.Stats().Refused == 0 {
		t.Fatal("no refused connection counted")
	}
	restoreAndPing(t, p, c)
}

func TestProxyBlackhole(t *testing.T) {
	leakCheck(t)
	_, p, c := proxiedServer(t)
	ctx := context.Background()
	p.Blackhole()
	tctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	err := c.Ping(tctx).Err()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("PING through a black hole: err = %v, want a timeout", err)
	}
	restoreAndPing(t, p, c)
}

func TestProxyTargetDown(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	c := proxied(t, p)
	srv.Stop()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING through a proxy to a stopped server succeeded")
	}
	srv.Restart(t)
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("PING after the server came back: %v", err)
	}
	_ = c.Close()
	p.Close()
}

// The proxy counts request/response turns per connection: sequential
// requests one each, requests sent before the replies came back one in all,
// and a request after a pushed message one.
func TestProxyExchanges(t *testing.T) {
	leakCheck(t)
	srv := redistest.Start(t)
	p := redistest.NewProxy(t, srv.Addr())
	p.SetDelay(10 * time.Millisecond)
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	send := func(cmds ...string) { // in one write: they arrive before any reply
		t.Helper()
		var b []byte
		for _, cmd := range cmds {
			b = append(b, cmd+"\r\n"...)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil || line != want+"\r\n" {
			t.Fatalf("read %q, %v; want %q", line, err, want)
		}
	}
	exchanges := func(want int64) {
		t.Helper()
		if got := p.Stats().Exchanges; got != want {
			t.Fatalf("%d exchanges, want %d", got, want)
		}
	}
	for range 3 {
		send("PING")
		expect("+PONG")
	}
	exchanges(3)
	send("PING", "PING") // pipelined: one turn
	expect("+PONG")
	expect("+PONG")
	exchanges(4)
	send("SUBSCRIBE ch")
	for _, line := range []string{"*3", "$9", "subscribe", "$2", "ch", ":1"} {
		expect(line)
	}
	if err := srv.Client(t).Publish(context.Background(), "ch", "m").Err(); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"*3", "$7", "message", "$2", "ch", "$1", "m"} {
		expect(line)
	}
	exchanges(5) // the pushed message is no exchange of the client's
	send("PING")
	for _, line := range []string{"*2", "$4", "pong", "$0", ""} {
		expect(line)
	}
	exchanges(6)
}
