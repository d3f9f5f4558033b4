package grpclock_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/reqlock/reqlock/grpclock/internal/testsvc"
	"github.com/reqlock/reqlock/internal/adaptertest"
)

// redisAddr is the address the examples connect to: the tests' own
// redis-server.
var redisAddr = "localhost:6379"

func TestMain(m *testing.M) { adaptertest.Main(m, func() { redisAddr = adaptertest.Shared.Addr() }) }

// service implements the test service with replaceable methods.
type service struct {
	testsvc.UnimplementedTestServer
	do   func(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error)
	chat func(stream testsvc.Test_ChatServer) error
}

func (s *service) Do(ctx context.Context, req *testsvc.Request) (*testsvc.Reply, error) {
	return s.do(ctx, req)
}

func (s *service) Chat(stream testsvc.Test_ChatServer) error { return s.chat(stream) }

// serve runs svc over bufconn with the server options and returns a client.
func serve(t testing.TB, svc *service, opts ...grpc.ServerOption) testsvc.TestClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(opts...)
	testsvc.RegisterTestServer(srv, svc)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	return testsvc.NewTestClient(conn)
}
