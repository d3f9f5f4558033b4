package kratoslock_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-kratos/kratos/v2/log"
	"github.com/go-kratos/kratos/v2/middleware"
	kgrpc "github.com/go-kratos/kratos/v2/transport/grpc"
	khttp "github.com/go-kratos/kratos/v2/transport/http"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/reqlock/reqlock/internal/adaptertest"
	"github.com/reqlock/reqlock/kratoslock/internal/testsvc"
)

// redisAddr is the address the examples connect to: the tests' own
// redis-server.
var redisAddr = "localhost:6379"

func TestMain(m *testing.M) {
	log.SetLogger(log.NewStdLogger(io.Discard))
	adaptertest.Main(m, func() { redisAddr = adaptertest.Shared.Addr() })
}

// doFunc is the handler of the test service's Do, on either transport.
type doFunc func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error)

// service implements the gRPC test service with do.
type service struct {
	testsvc.UnimplementedTestServer
	do doFunc
}

func (s *service) Do(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
	return s.do(ctx, req)
}

// serveGRPC runs do on Kratos's gRPC transport, on loopback, with the
// middleware mws and no server timeout (unless opts set one), and returns a
// client.
func serveGRPC(t testing.TB, do doFunc, mws []middleware.Middleware, opts ...kgrpc.ServerOption) testsvc.TestClient {
	t.Helper()
	srv := kgrpc.NewServer(append([]kgrpc.ServerOption{kgrpc.Address("127.0.0.1:0"), kgrpc.Timeout(0), kgrpc.Middleware(mws...)}, opts...)...)
	testsvc.RegisterTestServer(srv, &service{do: do})
	u, err := srv.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Start(context.Background()) }()
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		_ = srv.Stop(context.Background())
		<-served
	})
	return testsvc.NewTestClient(conn)
}

// httpClient calls the test service on Kratos's HTTP transport: POST
// /orders/{id} with a JSON Request.
type httpClient struct {
	base   string
	client *http.Client
}

// serveHTTP runs do on Kratos's HTTP transport, on loopback, as the route
// POST /orders/{id} (what protoc-gen-go-http generates: bind the body and
// path, run the middleware, write the result), with the middleware mws and
// no server timeout (unless opts set one).
func serveHTTP(t testing.TB, do doFunc, mws []middleware.Middleware, opts ...khttp.ServerOption) *httpClient {
	t.Helper()
	srv := khttp.NewServer(append([]khttp.ServerOption{khttp.Address("127.0.0.1:0"), khttp.Timeout(0), khttp.Middleware(mws...)}, opts...)...)
	srv.Route("/").POST("/orders/{id}", func(c khttp.Context) error {
		var in testsvc.Request
		if err := c.Bind(&in); err != nil {
			return err
		}
		khttp.SetOperation(c, "/reqlock.kratoslock.testsvc.Test/Do")
		h := c.Middleware(func(ctx context.Context, req any) (any, error) { return do(ctx, req.(*testsvc.Request)) })
		out, err := h(c, &in)
		if err != nil {
			return err
		}
		return c.Result(http.StatusOK, out)
	})
	u, err := srv.Endpoint()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Start(context.Background()) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Stop(context.Background())
		<-served
	})
	return &httpClient{base: u.String(), client: &http.Client{Transport: tr}}
}

// answer is what a call over HTTP got: the status, the lock name of a
// success, the reason of a Kratos error, the Retry-After header.
type answer struct {
	Status     int
	Lock       string `json:"lock"`
	Reason     string `json:"reason"`
	RetryAfter string
}

// do posts the order id to /orders/{path}?tenant=query, with the headers
// (name, value pairs).
func (c *httpClient) do(ctx context.Context, path, id, query string, header ...string) (answer, error) {
	url := c.base + "/orders/" + path
	if query != "" {
		url += "?tenant=" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"order":{"id":"`+id+`"}}`))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
	return a, json.NewDecoder(resp.Body).Decode(&a)
}
