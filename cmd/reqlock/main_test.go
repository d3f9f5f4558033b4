package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
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
	name  string
	setup func(t *testing.T) (url string, store core.Store)
}

var storeCases = []storeCase{
	{"redis", func(t *testing.T) (string, core.Store) {
		s := server(t, "redis", func() (*redistest.Server, func(), error) {
			s, err := redistest.Launch()
			return s, func() { s.Close() }, err
		})
		c := redis.NewClient(s.Options())
		t.Cleanup(func() { _ = c.Close() })
		return "redis://" + s.Addr(), core.NewRedisStore(c)
	}},
	{"redis-cluster", func(t *testing.T) (string, core.Store) {
		cl := server(t, "redis-cluster", func() (*redistest.Cluster, func(), error) {
			c, err := redistest.LaunchCluster(3, 0)
			return c, func() { c.Close() }, err
		})
		c := redis.NewClusterClient(cl.Options())
		t.Cleanup(func() { _ = c.Close() })
		return "redis-cluster://" + strings.Join(cl.Addrs(), ","), core.NewRedisStore(c)
	}},
	{"redis-sentinel", func(t *testing.T) (string, core.Store) {
		d := server(t, "redis-sentinel", func() (*redistest.Sentinel, func(), error) {
			d, err := redistest.LaunchSentinel()
			return d, func() { d.Close() }, err
		})
		c := redis.NewFailoverClient(d.FailoverOptions())
		t.Cleanup(func() { _ = c.Close() })
		return "redis-sentinel://" + d.Sentinel.Addr() + "/" + d.MasterName, core.NewRedisStore(c)
	}},
	{"etcd", func(t *testing.T) (string, core.Store) {
		p := server(t, "etcd", func() (*servers.Process, func(), error) {
			p, err := servers.Launch(servers.EtcdSpec())
			return p, func() { p.Close() }, err
		})
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		s, err := etcdstore.New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return "etcd://" + p.Addr(), s
	}},
	{"zookeeper", func(t *testing.T) (string, core.Store) {
		p := server(t, "zookeeper", func() (*servers.Process, func(), error) {
			p, err := servers.Launch(servers.ZooKeeperSpec())
			return p, func() { p.Close() }, err
		})
		conn, events, err := zk.Connect([]string{p.Addr()}, 20*time.Second, zk.WithLogInfo(false),
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
		s, err := zkstore.New(conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return "zk://" + p.Addr(), s
	}},
	{"postgres", func(t *testing.T) (string, core.Store) {
		p := server(t, "postgres", func() (*servers.Process, func(), error) {
			p, err := servers.Launch(servers.PostgresSpec())
			return p, func() { p.Close() }, err
		})
		url := servers.PostgresURL(p.Addr())
		return url, sqlStore(t, "pgx", url)
	}},
	{"mysql", func(t *testing.T) (string, core.Store) {
		p := server(t, "mariadb", func() (*servers.Process, func(), error) {
			p, err := servers.Launch(servers.MariaDBSpec())
			if err != nil {
				return nil, nil, err
			}
			db, err := sql.Open("mysql", servers.MariaDBUser+"@tcp("+p.Addr()+")/")
			if err == nil {
				_, err = db.Exec("CREATE DATABASE IF NOT EXISTS locks")
				db.Close()
			}
			return p, func() { p.Close() }, err
		})
		return "mysql://" + servers.MariaDBUser + "@" + p.Addr() + "/locks",
			sqlStore(t, "mysql", servers.MariaDBUser+"@tcp("+p.Addr()+")/locks")
	}},
	{"memcached", func(t *testing.T) (string, core.Store) {
		p := server(t, "memcached", func() (*servers.Process, func(), error) {
			p, err := servers.Launch(servers.MemcachedSpec())
			return p, func() { p.Close() }, err
		})
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

// sqlStore opens a database with driver and dsn and returns a Store on its
// lock table (created if missing), closed when the test ends.
func sqlStore(t *testing.T, driver, dsn string) core.Store {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s, err := sqlstore.New(db)
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
		terminal: func(io.Writer) bool { return false },
		operator: func() string { return testOperator },
	})
	return result{code, out.String(), errb.String()}
}
