package core_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// tokenChars are the characters a token may use (core.MaxTokenLen's doc).
func tokenOK(t *testing.T, token string) {
	t.Helper()
	if len(token) > core.MaxTokenLen {
		t.Fatalf("token of %d bytes, want at most %d: %q", len(token), core.MaxTokenLen, token)
	}
	if core.MaxTokenLen > 255 {
		t.Fatalf("MaxTokenLen %d does not fit a VARBINARY(255) column", core.MaxTokenLen)
	}
	for _, c := range token {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			t.Fatalf("token %q has the character %q", token, c)
		}
	}
}

func TestHolderInToken(t *testing.T) {
	srv := redistest.Start(t)
	l := core.New(srv.Client(t), core.WithHolderField("tenant", func(ctx context.Context) string { return "acme" }))
	ctx := core.ContextWithRequestID(context.Background(), "ctx-id")
	before := time.Now().Truncate(time.Millisecond)
	lease, err := l.Acquire(ctx, "order:42", core.Route("/orders/:id"), core.RequestID("req-7"), core.Permits(3))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	tokenOK(t, lease.Token())
	h, ok := core.ParseHolder(lease.Token())
	if !ok {
		t.Fatalf("ParseHolder(%q) found no holder", lease.Token())
	}
	host, _ := os.Hostname()
	if len(host) > 32 {
		host = host[:32]
	}
	switch {
	case h.Host != host, h.PID != os.Getpid():
		t.Errorf("holder %v: want host %q pid %d", h, host, os.Getpid())
	case h.Route != "/orders/:id", h.RequestID != "req-7":
		t.Errorf("holder %v: want route /orders/:id and the call's request id req-7", h)
	case h.Mode != core.ModePermits, h.Permits != 3:
		t.Errorf("holder %v: want permits 3", h)
	case h.Since.Before(before), h.Since.After(time.Now()):
		t.Errorf("holder since %v, want between %v and now", h.Since, before)
	case len(h.Fields) != 1, h.Fields[0] != (core.HolderField{Key: "tenant", Value: "acme"}):
		t.Errorf("holder fields %v, want tenant=acme", h.Fields)
	}
	if s := h.String(); !strings.Contains(s, "route /orders/:id") || !strings.Contains(s, "request req-7") || !strings.Contains(s, "tenant=acme") {
		t.Errorf("String() = %q", s)
	}

	// The context's id when the call has none; the Locker's func last.
	l2 := core.New(srv.Client(t), core.WithRequestID(func(context.Context) string { return "from-func" }))
	for _, c := range []struct {
		ctx  context.Context
		want string
	}{{ctx, "ctx-id"}, {context.Background(), "from-func"}} {
		lease, err := l2.Acquire(c.ctx, "order:43")
		if err != nil {
			t.Fatal(err)
		}
		h, _ := core.ParseHolder(lease.Token())
		lease.Release(context.Background())
		if h.RequestID != c.want || h.Mode != core.ModeExclusive {
			t.Errorf("request id %q mode %v, want %q exclusive", h.RequestID, h.Mode, c.want)
		}
	}
}

func TestWithoutHolder(t *testing.T) {
	srv := redistest.Start(t)
	l := core.New(srv.Client(t), core.WithoutHolder())
	lease, err := l.Acquire(context.Background(), "order:42", core.Route("/orders/:id"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	if len(lease.Token()) != 26 {
		t.Errorf("token %q: want 26 random base32 characters", lease.Token())
	}
	if h, ok := core.ParseHolder(lease.Token()); ok {
		t.Errorf("ParseHolder of a plain token = %v, true", h)
	}
}

func TestHolderBounded(t *testing.T) {
	srv := redistest.Start(t)
	long := strings.Repeat("é", 100) + "\x00\n"
	var opts []core.Option
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		opts = append(opts, core.WithHolderField(k, func(context.Context) string { return long }))
	}
	l := core.New(srv.Client(t), opts...)
	lease, err := l.Acquire(context.Background(), "order:42", core.Route(long), core.RequestID(long))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	tokenOK(t, lease.Token())
	h, ok := core.ParseHolder(lease.Token())
	if !ok {
		t.Fatalf("ParseHolder(%q) found no holder", lease.Token())
	}
	if len(h.Route) > 40 || len(h.RequestID) > 36 || !strings.HasPrefix(h.Route, "éé") {
		t.Errorf("route %q request %q: want them cut to 40 and 36 bytes", h.Route, h.RequestID)
	}
	if len(h.Fields) == 0 || len(h.Fields) == 5 {
		t.Errorf("%d fields: want those that fit, not none and not all", len(h.Fields))
	}
}

func TestHolderOptionsRefused(t *testing.T) {
	srv := redistest.Start(t)
	for _, opt := range []core.Option{
		core.WithHolderField("", func(context.Context) string { return "" }),
		core.WithHolderField("a-key-longer-than-16", func(context.Context) string { return "" }),
		core.WithHolderField("k", nil),
		core.WithRequestID(nil),
	} {
		if err := core.New(srv.Client(t), opt).Err(); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("Err() = %v, want ErrInvalidOption", err)
		}
	}
}

func TestParseHolderRefusesForeignTokens(t *testing.T) {
	for _, tok := range []string{"", "x", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "ABCDEFGHIJKLMNOPQRSTUVWXYZ.", "ABCDEFGHIJKLMNOPQRSTUVWXYZ.!!", "reqlock:shares:3", "(shares)", "ABCDEFGHIJKLMNOPQRSTUVWXYZ.AQ"} {
		if h, ok := core.ParseHolder(tok); ok {
			t.Errorf("ParseHolder(%q) = %v, true", tok, h)
		}
	}
}

// FuzzParseHolder: any token either parses to a holder whose record the
// Locker could have written, or is refused; never a panic.
func FuzzParseHolder(f *testing.F) {
	f.Add("ABCDEFGHIJKLMNOPQRSTUVWXYZ.AQIDmKCy5Yw0rgMKYXBpLTcDAQ")
	f.Add("ABCDEFGHIJKLMNOPQRSTUVWXYZ.AQAA")
	f.Fuzz(func(t *testing.T, tok string) {
		h, ok := core.ParseHolder(tok)
		if !ok {
			return
		}
		if h.Mode > core.ModePermits || h.Permits < 0 || h.Permits > core.MaxPermits || len(h.Host) > 32 || len(h.Route) > 40 || len(h.RequestID) > 36 {
			t.Fatalf("ParseHolder(%q) = %+v: out of the record's bounds", tok, h)
		}
	})
}

func TestHolderTextIsPrintable(t *testing.T) {
	srv := redistest.Start(t)
	l := core.New(srv.Client(t))
	lease, err := l.Acquire(context.Background(), "order:42", core.Route("/a\u202e/b\u2028"), core.RequestID("id\x85\xff"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(context.Background())
	h, _ := core.ParseHolder(lease.Token())
	if h.Route != "/a?/b?" || h.RequestID != "id??" {
		t.Errorf("route %q request %q: want what is not printable replaced by '?'", h.Route, h.RequestID)
	}
}
