package adapter

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// headers is a Source of request headers only, case-insensitive as
// keyfunc.Source.Header is.
type headers map[string]string

func (h headers) Route() string                { return "/orders/:id" }
func (h headers) Param(string) (string, error) { return "", nil }
func (h headers) Query(string) (string, error) { return "", nil }
func (h headers) Field(string) (string, error) { return "", nil }
func (h headers) Header(name string) (string, error) {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, nil
		}
	}
	return "", nil
}

const (
	// validTP is the example of the W3C Trace Context specification.
	validTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	validID = "4bf92f3577b34da6a3ce929d0e0e4736"
)

func TestTraceID(t *testing.T) {
	for _, tc := range []struct {
		h  string
		ok bool
	}{
		{validTP, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true}, // not sampled
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", true}, // unknown flags are not read
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true}, // a later version, 55 long
		{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like", false}, // 00 is 55 long
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", false},
		{"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what", false}, // a later version goes on with "-"
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},      // version ff is invalid
		{"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false}, // uppercase
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false}, // all-zero trace-id
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false}, // all-zero parent-id
		{"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", false}, // misplaced dash
		{"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", false}, // short
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false},
		{" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
		{"", false},
	} {
		id, ok := TraceID(tc.h)
		switch {
		case ok != tc.ok:
			t.Errorf("TraceID(%q): ok %v, want %v", tc.h, ok, tc.ok)
		case ok && id != validID:
			t.Errorf("TraceID(%q) = %q, want %q", tc.h, id, validID)
		case !ok && id != "":
			t.Errorf("TraceID(%q) = %q for a malformed header", tc.h, id)
		}
	}
}

// traceparentRE is the grammar of the specification written as a regular
// expression, the oracle of FuzzTraceID: TraceID adds that version ff is
// invalid, version 00 has no suffix, and neither id is all zeros.
var traceparentRE = regexp.MustCompile(`(?s)\A([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?\z`)

func FuzzTraceID(f *testing.F) {
	for _, s := range []string{validTP, "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", "ff-" + validTP[3:],
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", strings.ToUpper(validTP), validTP + "-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		id, ok := TraceID(h)
		m := traceparentRE.FindStringSubmatch(h)
		want := m != nil && m[1] != "ff" && !(m[1] == "00" && m[4] != "") &&
			m[2] != strings.Repeat("0", 32) && m[3] != strings.Repeat("0", 16)
		if ok != want {
			t.Fatalf("TraceID(%q): ok %v, the grammar says %v", h, ok, want)
		}
		if ok && id != m[2] {
			t.Fatalf("TraceID(%q) = %q, want %q", h, id, m[2])
		}
		if !ok && id != "" {
			t.Fatalf("TraceID(%q) = %q for a malformed header", h, id)
		}
	})
}

func TestCleanRequestID(t *testing.T) {
	long := strings.Repeat("a", MaxRequestID)
	for in, want := range map[string]string{
		"7f3a-42":                   "7f3a-42",
		"  7f3a-42\t":               "7f3a-42",
		"7f3a\r\nX-Evil: 1":         "7f3aX-Evil: 1",
		"\x1b[31mred\x1b[0m":        "[31mred[0m",
		"a\u202eb\u2028c\u00a0d":    "abcd", // a bidi override, a line separator, a no-break space
		"id\xff\xfe":                "id",
		"\x00\x01":                  "",
		"commande-été":              "commande-été",
		long:                        long,
		long + "b":                  long,
		long[:MaxRequestID-1] + "é": long[:MaxRequestID-1], // cut at a character boundary
		"":                          "",
	} {
		if got := CleanRequestID(in); got != want {
			t.Errorf("CleanRequestID(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzCleanRequestID(f *testing.F) {
	for _, s := range []string{"7f3a", " a\r\nb ", "\x1b[0m", "é\xff", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		id := CleanRequestID(v)
		if len(id) > MaxRequestID || !utf8.ValidString(id) || strings.TrimSpace(id) != id {
			t.Fatalf("CleanRequestID(%q) = %q: too long, invalid UTF-8 or surrounded by space", v, id)
		}
		for _, r := range id {
			if !unicode.IsPrint(r) {
				t.Fatalf("CleanRequestID(%q) = %q keeps %U", v, id, r)
			}
		}
		if CleanRequestID(id) != id {
			t.Fatalf("CleanRequestID is not idempotent on %q", v)
		}
	})
}

// TestRequestID: the named header first, then the traceparent's trace-id,
// then nothing; "" reads no named header.
func TestRequestID(t *testing.T) {
	for _, tc := range []struct {
		src    headers
		header string
		want   string
	}{
		{headers{"x-request-id": "req-1", "Traceparent": validTP}, DefaultRequestIDHeader, "req-1"},
		{headers{"Traceparent": validTP}, DefaultRequestIDHeader, validID},
		{headers{"X-Request-Id": " \r\n", "traceparent": validTP}, DefaultRequestIDHeader, validID}, // empty once cleaned
		{headers{"X-Request-Id": "req-1", "traceparent": validTP}, "", validID},
		{headers{"X-Correlation-Id": "corr-1", "X-Request-Id": "req-1"}, "X-Correlation-Id", "corr-1"},
		{headers{"X-Request-Id": "req-1"}, "", ""},
		{headers{"traceparent": strings.ToUpper(validTP)}, DefaultRequestIDHeader, ""},
		{headers{}, DefaultRequestIDHeader, ""},
	} {
		if got := RequestID(tc.src, tc.header); got != tc.want {
			t.Errorf("RequestID(%v, %q) = %q, want %q", tc.src, tc.header, got, tc.want)
		}
	}
}

// TestRequestIDHeaderOption: the default, another name, none, and a bad
// name, which is a set-up error.
func TestRequestIDHeaderOption(t *testing.T) {
	var c Config[*req]
	if got := c.requestIDHeader(); got != DefaultRequestIDHeader {
		t.Errorf("default: %q", got)
	}
	c.SetRequestIDHeader("X-Correlation-Id")
	if got := c.requestIDHeader(); got != "X-Correlation-Id" {
		t.Errorf("set: %q", got)
	}
	c.SetRequestIDHeader("")
	if got := c.requestIDHeader(); got != "" {
		t.Errorf("off: %q", got)
	}
	if len(c.problems) != 0 {
		t.Fatalf("valid names reported: %v", c.problems)
	}
	for _, bad := range []string{"X Request", "X-Id:", "id\n", "é"} {
		var c Config[*req]
		c.SetRequestIDHeader(bad)
		_, err := NewFlow("x", core.New(nil), byHeader, &c, testProtocol)
		if !errors.Is(err, core.ErrInvalidOption) || !strings.Contains(err.Error(), "WithRequestIDHeader(") {
			t.Errorf("%q: %v, want an ErrInvalidOption naming WithRequestIDHeader", bad, err)
		}
	}
}

// TestFlowRecordsRequestID: the lease a flow takes carries the request's
// id in its holder record (core.ParseHolder), with its route: the
// header's, else the traceparent's, else the Locker's source's; an id on
// the context (core.ContextWithRequestID) wins over the headers; and
// WithRequestIDHeader("") reads the traceparent only.
func TestFlowRecordsRequestID(t *testing.T) {
	adaptertest.LeakCheck(t)
	e := adaptertest.NewEnv(t, nil, core.WithRequestID(func(context.Context) string { return "from-the-locker" }))
	def := newFlow(t, e.Locker, nil)
	off := newFlow(t, e.Locker, func(c *Config[*req]) { c.SetRequestIDHeader("") })
	ctxID := core.ContextWithRequestID(context.Background(), "from-the-context")
	for _, tc := range []struct {
		what string
		f    *Flow[*req]
		ctx  context.Context
		h    headers
		want string
	}{
		{"X-Request-Id", def, context.Background(), headers{"X-Request-Id": "req-1", "traceparent": validTP}, "req-1"},
		{"traceparent", def, context.Background(), headers{"traceparent": validTP}, validID},
		{"neither", def, context.Background(), headers{}, "from-the-locker"},
		{"the context's", def, ctxID, headers{"X-Request-Id": "req-1", "traceparent": validTP}, "from-the-context"},
		{"no header", off, context.Background(), headers{"X-Request-Id": "req-1", "traceparent": validTP}, validID},
		{"no header, no traceparent", off, context.Background(), headers{"X-Request-Id": "req-1"}, "from-the-locker"},
	} {
		tc.h["X-Name"] = adaptertest.Uniq(t)
		x := &req{}
		lease, ok := tc.f.Lock(tc.ctx, x, tc.h)
		if !ok || lease == nil {
			t.Fatalf("%s: not locked: %+v", tc.what, x.failure)
		}
		h, ok := core.ParseHolder(lease.Token())
		if !ok || h.RequestID != tc.want || h.Route != "/orders/:id" {
			t.Errorf("%s: the holder is %v (ok %v), want request id %q on /orders/:id", tc.what, h, ok, tc.want)
		}
		if err := lease.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
