package redistest

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Nodes is a set of independent redis-server processes (no replication, no
// cluster), as Redlock wants them.
type Nodes []*Server

// StartNodes starts n independent servers for the test and stops them when
// it ends.
func StartNodes(tb testing.TB, n int, args ...string) Nodes {
	tb.Helper()
	nodes := make(Nodes, n)
	for i := range nodes {
		nodes[i] = Start(tb, args...)
	}
	return nodes
}

// Clients returns one new client per node, each closed when the test ends,
// typed as redis.UniversalClient for APIs that take several deployments.
func (ns Nodes) Clients(tb testing.TB) []redis.UniversalClient {
	tb.Helper()
	clients := make([]redis.UniversalClient, len(ns))
	for i, s := range ns {
		clients[i] = s.Client(tb)
	}
	return clients
}

// Addrs returns the nodes' addresses.
func (ns Nodes) Addrs() []string {
	addrs := make([]string, len(ns))
	for i, s := range ns {
		addrs[i] = s.Addr()
	}
	return addrs
}
