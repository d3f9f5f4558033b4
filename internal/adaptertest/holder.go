package adaptertest

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reqlock/reqlock/core"
)

// Traceparent is a W3C Trace Context traceparent header (the example of the
// specification), and TraceparentID its trace-id.
const (
	Traceparent   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	TraceparentID = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// FallbackRequestID is the request id that the Locker of the holder
// scenarios gives (core.WithRequestID) to a request in which the adapter
// finds none.
const FallbackRequestID = "from-the-locker"

// holderCase is a request of the holder scenarios: its headers, and the
// request id its lock's holder must show.
type holderCase struct {
	what    string
	headers []string // name, value, ...
	custom  bool     // sent to the route or interceptor WithRequestIDHeader("X-Correlation-Id")
	want    string
}

// holderCases are the requests of the holder scenarios; id, short (the
// holder record keeps 36 bytes of a request id), makes their request ids
// the test's own.
func holderCases(id string) []holderCase {
	return []holderCase{
		{"X-Request-Id and traceparent", []string{"x-request-id", "req-" + id, "traceparent", Traceparent}, false, "req-" + id},
		{"traceparent only", []string{"traceparent", Traceparent}, false, TraceparentID},
		{"a malformed traceparent", []string{"traceparent", strings.ToUpper(Traceparent)}, false, FallbackRequestID},
		{"no request id", nil, false, FallbackRequestID},
		{"WithRequestIDHeader", []string{"x-correlation-id", "corr-" + id, "x-request-id", "req-" + id}, true, "corr-" + id},
		{"WithRequestIDHeader, traceparent only", []string{"x-request-id", "req-" + id, "traceparent", Traceparent}, true, TraceparentID},
	}
}

// holderEnv is the Env of the holder scenarios: its Locker records the
// route label of every acquire (routes) and gives FallbackRequestID to a
// request without a request id.
func holderEnv(t *testing.T, routes *Routes) *Env {
	LeakCheck(t)
	return NewEnv(t, nil, core.WithTTL(10*time.Second), core.WithHandlers(routes.Handler()),
		core.WithRequestID(func(context.Context) string { return FallbackRequestID }))
}

// checkHolder parses the token of a lease that a request held and checks
// its holder record: this process, the request id want, the route label
// the Locker was given (label, or its start, as the record bounds it; it
// must contain route), exclusive.
func checkHolder(t *testing.T, what, token, want, label, route string) {
	t.Helper()
	h, ok := core.ParseHolder(token)
	switch {
	case !ok:
		t.Errorf("%s: the token %q has no holder record", what, token)
	case h.RequestID != want:
		t.Errorf("%s: the holder's request id is %q, want %q (%v)", what, h.RequestID, want, h)
	case h.Route == "" || !strings.HasPrefix(label, h.Route) || !strings.Contains(h.Route, route):
		t.Errorf("%s: the holder's route is %q, want the acquire's label %q, of %s", what, h.Route, label, route)
	case h.PID != os.Getpid() || h.Mode != core.ModeExclusive || h.Since.IsZero():
		t.Errorf("%s: the holder is %v, want this process (pid %d) holding exclusively since the request", what, h, os.Getpid())
	}
}

// holderIdentity: the lock a request holds carries its holder record in
// its token (core.ParseHolder): the route label and the request id, from
// X-Request-Id, else from the trace-id of a well-formed traceparent, else
// from the Locker's core.WithRequestID; WithRequestIDHeader names another
// header.
func holderIdentity(t *testing.T, serve Serve) {
	routes := &Routes{}
	env := holderEnv(t, routes)
	var mu sync.Mutex
	tokens := map[string]string{} // by path
	handle := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		tokens[r.URL.Path] = core.LeaseFromContext(r.Context()).Token()
	}
	h, err := serve(t, env.Locker, []Route{
		{Methods: []string{http.MethodPost}, Path: "/orders/{id}", Key: mustTemplate("order:{param.id}"), Mode: Mode{Wait: wait}, Handle: handle},
		{Methods: []string{http.MethodPost}, Path: "/carts/{id}", Key: mustTemplate("cart:{param.id}"),
			Mode: Mode{Wait: wait, RequestIDHeader: "X-Correlation-Id"}, Handle: handle},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := idOf(t)
	for i, tc := range holderCases(id) {
		route := "/orders/"
		if tc.custom {
			route = "/carts/"
		}
		path := route + id + "-" + string(rune('a'+i))
		if code := Call(h, http.MethodPost, path, "", tc.headers...).Code; code != http.StatusOK {
			t.Errorf("%s: answered %d", tc.what, code)
			continue
		}
		mu.Lock()
		token := tokens[path]
		mu.Unlock()
		checkHolder(t, tc.what, token, tc.want, routes.Last(), route)
	}
}

// rpcHolderIdentity is holderIdentity for an RPC adapter, with metadata
// (or headers), on unary calls and, if the service has them, streams.
func rpcHolderIdentity(t *testing.T, r RPC) {
	routes := &Routes{}
	e := holderEnv(t, routes)
	var mu sync.Mutex
	var token string
	handle := func(l *core.Lease) error {
		mu.Lock()
		defer mu.Unlock()
		token = l.Token()
		return nil
	}
	plain := r.Serve(t, e, OrderKey, RPCMode{}, handle)
	custom := r.Serve(t, e, OrderKey, RPCMode{RequestIDHeader: "X-Correlation-Id"}, handle)
	id, rid := Uniq(t), idOf(t)
	for _, stream := range []bool{false, true} {
		if stream && !r.Streams {
			continue
		}
		for _, tc := range holderCases(rid) {
			call, what := plain, tc.what
			if tc.custom {
				call = custom
			}
			if stream {
				what += " (a stream)"
			}
			mu.Lock()
			token = ""
			mu.Unlock()
			if _, err := call(context.Background(), RPCRequest{ID: id, Header: tc.headers, Stream: stream}); err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			mu.Lock()
			got := token
			mu.Unlock()
			checkHolder(t, what, got, tc.want, routes.Last(), "/")
		}
	}
}
