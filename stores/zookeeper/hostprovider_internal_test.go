package zkstore

import (
	"testing"
	"time"
)

// fakeTime is a HostProvider's clock and sleep: sleeping moves the clock
// on and is recorded.
type fakeTime struct {
	now    time.Time
	slept  []time.Duration
	random func(n int64) int64
}

func newTestProvider(t *testing.T, ft *fakeTime, servers ...string) *HostProvider {
	t.Helper()
	ft.now = time.Unix(1000, 0)
	p := NewHostProvider()
	p.now = func() time.Time { return ft.now }
	p.sleep = func(d time.Duration) { ft.slept = append(ft.slept, d); ft.now = ft.now.Add(d) }
	p.rand = func(n int64) int64 { return ft.random(n) }
	if err := p.Init(servers); err != nil {
		t.Fatal(err)
	}
	return p
}

// step is what one call of Next should do: its pause (0: none) and its
// retryStart.
type step struct {
	pause time.Duration
	retry bool
}

// run calls Next once per step and checks its pause and retryStart; a
// retryStart moves the clock on by go-zookeeper's second.
func (ft *fakeTime) run(t *testing.T, p *HostProvider, what string, steps []step) {
	t.Helper()
	for i, want := range steps {
		n := len(ft.slept)
		_, retry := p.Next()
		var pause time.Duration
		if len(ft.slept) > n {
			pause = ft.slept[n]
		}
		if pause != want.pause || retry != want.retry || len(ft.slept) > n+1 {
			t.Fatalf("%s, Next #%d: paused %v (%d sleeps), retryStart %v; want a pause of %v, retryStart %v",
				what, i+1, pause, len(ft.slept)-n, retry, want.pause, want.retry)
		}
		if retry {
			ft.now = ft.now.Add(time.Second)
		}
	}
}

const ms = time.Millisecond

// repeat returns n times st.
func repeat(st step, n int) []step {
	steps := make([]step, n)
	for i := range steps {
		steps[i] = st
	}
	return steps
}

// TestHostProviderOneServer: with one server, the first dial and the
// first after a session broke come at once; after each failed dial the
// pause doubles from 50 ms to 250 ms; go-zookeeper's own pause (retryStart)
// comes only once the server has been out of reach for 3 s, then 3 s after
// each of its pauses.
func TestHostProviderOneServer(t *testing.T) {
	ft := &fakeTime{random: func(n int64) int64 { return n - 1 }} // the whole delay
	p := newTestProvider(t, ft, "127.0.0.1:2181")
	if p.Len() != 1 {
		t.Errorf("Len %d, want 1", p.Len())
	}
	// Never connected: dials at 0, 50, 150, 350 ms, then every 250 ms up
	// to 3100 ms, where go-zookeeper takes its second (to 4100 ms); then
	// every 250 ms again up to 7100 ms.
	growing := []step{{0, false}, {50 * ms, false}, {100 * ms, false}, {200 * ms, false}}
	steps := append(growing, repeat(step{250 * ms, false}, 11)...)
	steps = append(steps, step{0, true})
	steps = append(steps, repeat(step{250 * ms, false}, 12)...)
	steps = append(steps, step{0, true}, step{250 * ms, false})
	ft.run(t, p, "from Init", steps)
	p.Connected()
	steps = append(growing, repeat(step{250 * ms, false}, 11)...)
	ft.run(t, p, "after Connected", append(steps, step{0, true}))
	// Each pause is taken at random between half and all of its delay.
	ft.random = func(int64) int64 { return 0 }
	p.Connected()
	ft.run(t, p, "after Connected, shortest pauses", []step{
		{0, false}, {25 * ms, false}, {50 * ms, false}, {100 * ms, false}, {125 * ms, false}, {125 * ms, false},
	})
}

// TestHostProviderEnsemble: with three servers, a round tries each once;
// pauses come only after a round in which all failed, none after the round
// that follows a broken session.
func TestHostProviderEnsemble(t *testing.T) {
	ft := &fakeTime{random: func(n int64) int64 { return n - 1 }}
	servers := []string{"127.0.0.1:1", "127.0.0.2:2", "127.0.0.3:3"}
	p := newTestProvider(t, ft, servers...)
	if p.Len() != 3 {
		t.Errorf("Len %d, want 3", p.Len())
	}
	// round makes three attempts, which must dial each server once and
	// pause as said (0: not at all) once, before one of them.
	round := func(what string, pause time.Duration) {
		t.Helper()
		n := len(ft.slept)
		seen := map[string]bool{}
		for range 3 {
			s, retry := p.Next()
			if retry {
				t.Fatalf("%s: retryStart", what)
			}
			seen[s] = true
		}
		if len(seen) != 3 {
			t.Fatalf("%s: dialed %v, want each of %v once", what, seen, servers)
		}
		got := ft.slept[n:]
		if (pause == 0 && len(got) != 0) || (pause != 0 && (len(got) != 1 || got[0] != pause)) {
			t.Fatalf("%s: pauses %v; want one of %v", what, got, pause)
		}
	}
	round("first round", 0)
	round("second round", 50*ms)
	round("third round", 100*ms)
	_, _ = p.Next() // connects to the first server of the fourth round (pause 200 ms)
	p.Connected()
	// The session breaks: the two others, then that server again, at once;
	// then pauses from 50 ms again.
	round("round after the session broke", 0)
	round("first failed round after the session", 50*ms)
	round("second failed round after the session", 100*ms)
}

// TestHostProviderDefaults: the zero value resolves and pauses for real.
func TestHostProviderDefaults(t *testing.T) {
	var p HostProvider
	if err := p.Init([]string{"no port"}); err == nil {
		t.Error("Init of an address without a port: no error")
	}
	if err := p.Init([]string{"127.0.0.1:2181"}); err != nil {
		t.Fatal(err)
	}
	if s, retry := p.Next(); retry || s == "" {
		t.Errorf("first Next: %q, %v", s, retry)
	}
	start := time.Now()
	if _, retry := p.Next(); retry {
		t.Error("second Next: retryStart")
	}
	if took := time.Since(start); took < reconnectMinDelay/2 {
		t.Errorf("second Next returned after %v; want a pause of %v at least", took, reconnectMinDelay/2)
	}
}
