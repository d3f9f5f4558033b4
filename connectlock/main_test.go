package connectlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/reqlock/reqlock/connectlock/internal/testsvc"
	"github.com/reqlock/reqlock/connectlock/internal/testsvc/testsvcconnect"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// redisAddr is the address the examples connect to: the tests' own
// redis-server.
var redisAddr = "localhost:6379"

func TestMain(m *testing.M) {
	adaptertest.Main(m, func() { redisAddr = adaptertest.Shared.Addr() })
}

type (
	bidi     = connect.BidiStream[testsvc.Request, testsvc.Reply]
	outbound = connect.ServerStream[testsvc.Reply]
)

// service implements the test service with replaceable methods.
type service struct {
	testsvcconnect.UnimplementedTestHandler
	do    func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error)
	chat  func(ctx context.Context, s *bidi) error
	watch func(ctx context.Context, req *testsvc.Request, s *outbound) error
}

func (s *service) Do(ctx context.Context, req *connect.Request[testsvc.Request]) (*connect.Response[testsvc.Reply], error) {
	reply, err := s.do(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(reply), nil
}

func (s *service) Chat(ctx context.Context, stream *bidi) error { return s.chat(ctx, stream) }

func (s *service) Watch(ctx context.Context, req *connect.Request[testsvc.Request], stream *outbound) error {
	return s.watch(ctx, req.Msg, stream)
}

// serve runs svc with the handler options on a loopback HTTP server and
// returns a client of it.
func serve(t testing.TB, svc *service, opts ...connect.HandlerOption) testsvcconnect.TestClient {
	t.Helper()
	url, client := serveURL(t, svc, opts...)
	return testsvcconnect.NewTestClient(client, url)
}

// serveURL runs svc with the handler options on a loopback HTTP server that
// speaks HTTP/1.1 and h2c (HTTP/2 without TLS, which streams need), and
// returns its URL and an HTTP client that speaks h2c to it.
func serveURL(t testing.TB, svc *service, opts ...connect.HandlerOption) (string, *http.Client) {
	t.Helper()
	path, h := testsvcconnect.NewTestHandler(svc, opts...)
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
	})
	return srv.URL, &http.Client{Transport: tr}
}
