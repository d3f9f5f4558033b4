package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/internal/testmain"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// The servers of the test binary: one of each kind, started by the first
// test that needs it and stopped when all tests are done.
var (
	serversMu sync.Mutex
	started   = map[string]any{}
	stops     []func()
)

func TestMain(m *testing.M) {
	testmain.Run(m, func() (func(), error) {
		return func() {
			serversMu.Lock()
			defer serversMu.Unlock()
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
		}, nil
	})
}

// server returns the server of kind, launching it on first use.
func server[T any](t *testing.T, kind string, launch func() (T, func(), error)) T {
	t.Helper()
	serversMu.Lock()
	defer serversMu.Unlock()
	if s, ok := started[kind]; ok {
		return s.(T)
	}
	s, stop, err := launch()
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	started[kind] = s
	stops = append(stops, stop)
	return s
}

// storeCase is one store the commands are tested on: its URL for the
// command, and a Store for the test's own Lockers, built as a service
// builds it (examples/orders/lockstore.go), with the stores' defaults.
type storeCase struct {
	name string
	// launch starts the case's server if it is not running: call it
	// before a leak check, which must not count the server's goroutines.
	launch func(t *testing.T)
	setup  func(t *testing.T) (url string, store core.Store)
}

// The servers, one of each kind.
func redisServer(t *testing.T) *redistest.Server {
	return server(t, "redis", func() (*redistest.Server, func(), error) {
		s, err := redistest.Launch()
		return s, func() { s.Close() }, err
	})
}

func clusterServer(t *testing.T) *redistest.Cluster {
	return server(t, "redis-cluster", func() (*redistest.Cluster, func(), error) {
		c, err := redistest.LaunchCluster(3, 0)
		return c, func() { c.Close() }, err
	})
}

func sentinelServer(t *testing.T) *redistest.Sentinel {
	return server(t, "redis-sentinel", func() (*redistest.Sentinel, func(), error) {
		d, err := redistest.LaunchSentinel()
		return d, func() { d.Close() }, err
	})
}

// redlockServers returns three independent masters, for Redlock.
func redlockServers(t *testing.T) redistest.Nodes {
	return server(t, "redlock", func() (redistest.Nodes, func(), error) {
		var ns redistest.Nodes
		stop := func() {
			for _, n := range ns {
				n.Close()
			}
		}
		for range 3 {
			n, err := redistest.Launch()
			if err != nil {
				stop()
				return nil, nil, err
			}
			ns = append(ns, n)
		}
		return ns, stop, nil
	})
}

// process returns the server of spec, named kind.
func process(t *testing.T, kind string, spec func() servers.Spec) *servers.Process {
	return server(t, kind, func() (*servers.Process, func(), error) {
		p, err := servers.Launch(spec())
		return p, func() { p.Close() }, err
	})
}

func etcdServer(t *testing.T) *servers.Process { return process(t, "etcd", servers.EtcdSpec) }
func zkServer(t *testing.T) *servers.Process   { return process(t, "zookeeper", servers.ZooKeeperSpec) }
func pgServer(t *testing.T) *servers.Process   { return process(t, "postgres", servers.PostgresSpec) }
func memcachedServer(t *testing.T) *servers.Process {
	return process(t, "memcached", func() servers.Spec { return servers.MemcachedSpec() })
}

// mariaServer returns a MariaDB server with a database "locks".
func mariaServer(t *testing.T) *servers.Process {
	return server(t, "mariadb", func() (*servers.Process, func(), error) {
		p, err := servers.Launch(servers.MariaDBSpec())
		if err != nil {
			return nil, nil, err
		}
		db, err := sql.Open("mysql", servers.MariaDBUser+"@tcp("+p.Addr()+")/")
		if err == nil {
			_, err = db.Exec("CREATE DATABASE IF NOT EXISTS locks")
			db.Close()
		}
		return p, p.Close, err
	})
}

var storeCases = []storeCase{
	{"redis", func(t *testing.T) { redisServer(t) }, func(t *testing.T) (string, core.Store) {
		s := redisServer(t)
		c := redis.NewClient(s.Options())
		t.Cleanup(func() { _ = c.Close() })
		return "redis://" + s.Addr(), redisStore(t, c)
	}},
	{"redis-cluster", func(t *testing.T) { clusterServer(t) }, func(t *testing.T) (string, core.Store) {
		cl := clusterServer(t)
		c := redis.NewClusterClient(cl.Options())
		t.Cleanup(func() { _ = c.Close() })
		return "redis-cluster://" + strings.Join(cl.Addrs(), ","), redisStore(t, c)
	}},
	{"redis-sentinel", func(t *testing.T) { sentinelServer(t) }, func(t *testing.T) (string, core.Store) {
		d := sentinelServer(t)
		c := redis.NewFailoverClient(d.FailoverOptions())
		t.Cleanup(func() { _ = c.Close() })
		return "redis-sentinel://" + d.Sentinel.Addr() + "/" + d.MasterName, redisStore(t, c)
	}},
	{"etcd", func(t *testing.T) { etcdServer(t) }, func(t *testing.T) (string, core.Store) {
		p := etcdServer(t)
		return "etcd://" + p.Addr(), etcdStoreOn(t, p.Addr())
	}},
	{"zookeeper", func(t *testing.T) { zkServer(t) }, func(t *testing.T) (string, core.Store) {
		p := zkServer(t)
		return "zk://" + p.Addr(), zkStoreOn(t, p.Addr())
	}},
	{"postgres", func(t *testing.T) { pgServer(t) }, func(t *testing.T) (string, core.Store) {
		url := servers.PostgresURL(pgServer(t).Addr())
		return url, sqlStore(t, "pgx", url)
	}},
	{"mysql", func(t *testing.T) { mariaServer(t) }, func(t *testing.T) (string, core.Store) {
		p := mariaServer(t)
		return "mysql://" + servers.MariaDBUser + "@" + p.Addr() + "/locks",
			sqlStore(t, "mysql", servers.MariaDBUser+"@tcp("+p.Addr()+")/locks")
	}},
	{"memcached", func(t *testing.T) { memcachedServer(t) }, func(t *testing.T) (string, core.Store) {
		p := memcachedServer(t)
		c := memcache.New(p.Addr())
		t.Cleanup(func() { _ = c.Close() })
		s, err := memcachedstore.New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return "memcached://" + p.Addr(), s
	}},
}

// redisStore returns a Store on c, closed when the test ends (before c).
func redisStore(t *testing.T, c redis.UniversalClient) core.Store {
	s := core.NewRedisStore(c)
	t.Cleanup(closeStore(s))
	return s
}

// etcdStoreOn returns a Store on the etcd server at addr, closed when the
// test ends.
func etcdStoreOn(t *testing.T, addr string, opts ...etcdstore.Option) core.Store {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := etcdstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// zkStoreOn returns a Store on the ZooKeeper server at addr, closed when
// the test ends.
func zkStoreOn(t *testing.T, addr string, opts ...zkstore.Option) core.Store {
	conn, events, err := zk.Connect([]string{addr}, 20*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)),
		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := waitSession(ctx, events); err != nil {
		t.Fatal(err)
	}
	s, err := zkstore.New(conn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sqlStore opens a database with driver and dsn and returns a Store on its
// lock table (created if missing), closed when the test ends.
func sqlStore(t *testing.T, driver, dsn string, opts ...sqlstore.Option) core.Store {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := sqlstore.New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var seq atomic.Int64

// uniq returns a name prefix of the test's own, fresh on every run.
func uniq(t *testing.T) string {
	return fmt.Sprintf("t%d-%d:", time.Now().UnixNano(), seq.Add(1))
}

// result is what a command printed and its exit status.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// testOperator is who runs the commands of the tests.
const testOperator = "tester@testhost"

// reqlock runs the command line args in this process with stdin and the
// environment vars, and returns what it printed.
func reqlock(t *testing.T, stdin io.Reader, vars map[string]string, args ...string) result {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), args, env{
		stdin: stdin, stdout: &out, stderr: &errb,
		getenv:   func(k string) string { return vars[k] },
		now:      time.Now,
		terminal: func(any) bool { return false },
		operator: func() string { return testOperator },
	})
	return result{code, out.String(), errb.String()}
}
