package lockotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/internal/redistest"
	lockotel "github.com/reqlock/reqlock/otel"
)

// logBuffer collects the JSON lines of a slog.Logger.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes the lines written so far.
func (b *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// newLogLocker returns a Locker with a LogHandler writing JSON lines at level
// Debug and above into the returned buffer.
func newLogLocker(t *testing.T, lopts []lockotel.LogOption, opts ...core.Option) (*core.Locker, *logBuffer) {
	t.Helper()
	h, buf := newLogHandler(lopts...)
	l := core.New(adaptertest.Shared.Client(t), append([]core.Option{core.WithHandlers(h)}, opts...)...)
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return l, buf
}

// newLogHandler returns a LogHandler writing JSON lines at level Debug and
// above into the returned buffer.
func newLogHandler(lopts ...lockotel.LogOption) (*lockotel.LogHandler, *logBuffer) {
	buf := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return lockotel.NewLogHandler(logger, lopts...), buf
}

// want checks the fields of a log line; a nil value means "present".
func want(t *testing.T, line map[string]any, fields map[string]any) {
	t.Helper()
	for k, v := range fields {
		got, ok := line[k]
		switch {
		case !ok:
			t.Errorf("line %v: no %q", line, k)
		case v != nil && got != v:
			t.Errorf("line %v: %s = %v, want %v", line, k, got, v)
		}
	}
}

func TestLogAcquireRelease(t *testing.T) {
	adaptertest.LeakCheck(t)
	l, buf := newLogLocker(t, []lockotel.LogOption{lockotel.WithName()})
	name := uniq(t)
	ctx := core.ContextWithRoute(context.Background(), route)
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	lines := buf.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf)
	}
	want(t, lines[0], map[string]any{
		"level": "INFO", "msg": "lock acquire", "lock": name, "route": route,
		"outcome": "acquired", "attempts": 1.0, "ttl": float64(core.DefaultTTL), "wait": nil,
	})
	want(t, lines[1], map[string]any{
		"level": "INFO", "msg": "lock release", "lock": name, "route": route, "outcome": "released", "hold": nil,
	})
	if w := lines[0]["wait"].(float64); w <= 0 {
		t.Errorf("wait = %vns, want positive", w)
	}
	if h := lines[1]["hold"].(float64); h < float64(5*time.Millisecond) {
		t.Errorf("hold = %vns, want at least the 5ms slept", h)
	}
	for _, line := range lines {
		if _, ok := line["error_type"]; ok {
			t.Errorf("error_type on a success: %v", line)
		}
	}
}

func TestLogFailures(t *testing.T) {
	adaptertest.LeakCheck(t)
	l, buf := newLogLocker(t, []lockotel.LogOption{lockotel.WithName()}, core.WithWait(30*time.Millisecond))
	name := uniq(t)
	holdElsewhere(t, nil, name)
	if _, err := l.Acquire(context.Background(), name); !errors.Is(err, core.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	lines := buf.lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), buf)
	}
	want(t, lines[0], map[string]any{
		"level": "WARN", "msg": "lock acquire", "lock": name, "outcome": "timeout", "error_type": "timeout", "error": nil,
	})
	if _, ok := lines[0]["route"]; ok {
		t.Error("route logged on a context without one")
	}
	if e := lines[0]["error"].(string); !strings.Contains(e, name) {
		t.Errorf("error = %q, want the error's text", e)
	}
}

func TestLogLostLease(t *testing.T) {
	adaptertest.LeakCheck(t)
	l, buf := newLogLocker(t, []lockotel.LogOption{lockotel.WithErrorLevel(slog.LevelError)}, core.WithTTL(20*time.Millisecond))
	lease, err := l.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done()
	time.Sleep(10 * time.Millisecond)
	gone(t, adaptertest.Shared.Client(t), lease.Key())
	if err := lease.Release(context.Background()); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("release err = %v, want ErrNotHeld", err)
	}
	lines := buf.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf)
	}
	want(t, lines[1], map[string]any{"level": "ERROR", "msg": "lock release", "outcome": "lost", "error_type": "expired"})
}

// TestLogNameHiddenByDefault: without options, and with WithoutName (also
// after a WithName: the last one wins), the lines carry neither the lock
// name nor the error text that quotes it; error_type stays.
func TestLogNameHiddenByDefault(t *testing.T) {
	adaptertest.LeakCheck(t)
	for name, lopts := range map[string][]lockotel.LogOption{
		"default":              nil,
		"WithoutName":          {lockotel.WithoutName()},
		"WithName,WithoutName": {lockotel.WithName(), lockotel.WithoutName()},
	} {
		t.Run(name, func(t *testing.T) {
			l, buf := newLogLocker(t, lopts, core.WithWait(20*time.Millisecond))
			lockName := "customer:alice@example.com:" + uniq(t)
			ctx := core.ContextWithRoute(context.Background(), route)
			lease, err := l.Acquire(ctx, lockName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Acquire(ctx, lockName); !errors.Is(err, core.ErrTimeout) { // busy: held by lease
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			if err := lease.Release(ctx); err != nil {
				t.Fatal(err)
			}
			lines := buf.lines(t)
			if len(lines) != 3 {
				t.Fatalf("%d lines, want 3:\n%s", len(lines), buf)
			}
			if out := buf.String(); strings.Contains(out, lockName) || strings.Contains(out, "alice") {
				t.Errorf("the log carries the lock name:\n%s", out)
			}
			for _, line := range lines {
				if _, ok := line["lock"]; ok {
					t.Errorf("line %v: a lock attribute", line)
				}
			}
			want(t, lines[0], map[string]any{"msg": "lock acquire", "route": route, "outcome": "acquired"})
			want(t, lines[1], map[string]any{"msg": "lock acquire", "route": route, "outcome": "timeout", "error_type": "timeout"})
			want(t, lines[2], map[string]any{"msg": "lock release", "route": route, "outcome": "released"})
			if _, ok := lines[1]["error"]; ok {
				t.Error("error text logged without WithName")
			}
		})
	}
}

// TestLogWithName: WithName (also after a WithoutName) puts the lock name in
// every line and the error text in failed ones.
func TestLogWithName(t *testing.T) {
	adaptertest.LeakCheck(t)
	l, buf := newLogLocker(t, []lockotel.LogOption{lockotel.WithoutName(), lockotel.WithName()}, core.WithWait(20*time.Millisecond))
	name := uniq(t)
	lease, err := l.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(context.Background(), name); !errors.Is(err, core.ErrTimeout) { // busy: held by lease
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := buf.lines(t)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf)
	}
	for _, line := range lines {
		want(t, line, map[string]any{"lock": name})
	}
	want(t, lines[1], map[string]any{"outcome": "timeout", "error_type": "timeout", "error": nil})
	if e, _ := lines[1]["error"].(string); !strings.Contains(e, name) {
		t.Errorf("error = %q, want the error's text, which names the lock", e)
	}
}

func TestLogLevel(t *testing.T) {
	adaptertest.LeakCheck(t)
	var level slog.LevelVar
	level.Set(slog.LevelDebug - 1) // below the logger's Debug: nothing written
	l, buf := newLogLocker(t, []lockotel.LogOption{lockotel.WithLevel(&level)})
	name := uniq(t)
	lease, err := l.Acquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	if buf.String() != "" {
		t.Fatalf("a line below the logger's level was written: %s", buf)
	}
	level.Set(slog.LevelDebug) // changed while the lease is held: the release line is written
	if err := lease.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := buf.lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), buf)
	}
	want(t, lines[0], map[string]any{"level": "DEBUG", "msg": "lock release", "outcome": "released", "hold": nil})
}

func TestLogDefaultLogger(t *testing.T) {
	buf := &logBuffer{}
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	h := lockotel.NewLogHandler(nil, nil, lockotel.WithLevel(nil)) // nil options and level keep the defaults
	slog.SetDefault(slog.New(slog.NewJSONHandler(buf, nil)))       // after New: used all the same
	l := core.New(adaptertest.Shared.Client(t), core.WithHandlers(h))
	lease, err := l.Acquire(context.Background(), uniq(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Release(context.Background())
	if lines := buf.lines(t); len(lines) != 2 || lines[0]["level"] != "INFO" {
		t.Fatalf("lines on the default logger:\n%s", buf)
	}
}

// A panic further in the chain is logged as a failure, and goes on.
func TestLogPanicInTheChain(t *testing.T) {
	adaptertest.LeakCheck(t)
	h, buf := newLogHandler()
	p := &panicky{}
	l := core.New(adaptertest.Shared.Client(t), core.WithHandlers(h, p))
	ctx := context.Background()
	name := uniq(t)
	p.acquire.Store(true)
	mustPanic(t, func() { _, _ = l.Acquire(ctx, name) })
	p.acquire.Store(false)
	lease, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	p.release.Store(true)
	mustPanic(t, func() { _ = lease.Release(ctx) })
	lines := buf.lines(t)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), buf)
	}
	want(t, lines[0], map[string]any{"level": "WARN", "msg": "lock acquire", "outcome": "error", "error_type": "_OTHER"})
	want(t, lines[1], map[string]any{"msg": "lock acquire", "outcome": "acquired"})
	want(t, lines[2], map[string]any{"level": "WARN", "msg": "lock release", "outcome": "error", "error_type": "_OTHER", "hold": nil})
}

// A lease whose watchdog gave it up is logged as lost, even when its release
// then finds its key and deletes it.
func TestLogLeaseGivenUpByItsWatchdog(t *testing.T) {
	adaptertest.LeakCheck(t)
	h, buf := newLogHandler()
	proxy := redistest.NewProxy(t, adaptertest.Shared.Addr())
	opts, lopts := watchdogOptions(proxy)
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	// Dial now, before the outage.
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	l := core.New(c, append(lopts, core.WithHandlers(h))...)
	ctx := context.Background()
	lease := watchdogOutage(t, l, proxy, ctx, uniq(t))
	if err := lease.Release(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) {
		t.Fatal(err)
	}
	lines := buf.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf)
	}
	want(t, lines[1], map[string]any{"level": "WARN", "msg": "lock release", "outcome": "lost"})
	if et := lines[1]["error_type"]; et != lockotel.ErrorTypeRenewalFailed && et != lockotel.ErrorTypeNotHeld {
		t.Errorf("error_type = %v, want renewal_failed (or not_held had the key expired)", et)
	}
}

// A local hand-off is logged at both ends, with the LogHandler after the
// hotspot Guard among the options: the release that passed the lock and the
// acquire that took it over, with handed_off=true.
func TestLogHandoff(t *testing.T) {
	adaptertest.LeakCheck(t)
	name := uniq(t)
	guard := hotspot.New(hotspot.WithKeys(name), hotspot.WithHandoff(1))
	h, buf := newLogHandler()
	// A TTL long enough that the hand-off keeps the first lease's expiry (no
	// compare-and-extend) however long the waiter takes to park.
	l := core.New(adaptertest.Shared.Client(t), core.WithHandlers(guard, h), core.WithTTL(time.Minute))
	ctx := context.Background()
	first, err := l.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx, name)
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for parkedInGuardWait() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the second acquire did not park on the local lock")
		}
		time.Sleep(time.Millisecond)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	lines := buf.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), buf)
	}
	// The release that passed the lock on and the acquire that took it over
	// are logged from two goroutines, in either order.
	handed := map[string][]map[string]any{}
	for _, line := range lines {
		if v, ok := line["handed_off"]; ok {
			if v != true {
				t.Errorf("line %v: handed_off is not true", line)
			}
			handed[line["msg"].(string)] = append(handed[line["msg"].(string)], line)
		}
	}
	if len(handed["lock acquire"]) != 1 || len(handed["lock release"]) != 1 {
		t.Fatalf("lines with handed_off: %v; want one acquire and one release:\n%s", handed, buf)
	}
	want(t, handed["lock acquire"][0], map[string]any{"outcome": "acquired", "attempts": 0.0, "local_wait": nil})
	want(t, handed["lock release"][0], map[string]any{"outcome": "released", "hold": nil})
}
