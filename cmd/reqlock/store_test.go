package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/servers"
	"github.com/reqlock/reqlock/internal/testmain"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// TestBadStore: a store address the command cannot use is a usage error
// (exit 2) that says what is wrong, and lists the schemes when the scheme
// is the problem; no connection is tried.
func TestBadStore(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{[]string{"--store", "foo://x:1"}, nil, []string{`unknown scheme "foo"`, "redis://", "redis-sentinel://", "redis-cluster://", "etcd://", "zk://", "postgres://", "mysql://", "memcached://"}},
		{[]string{"--store", "localhost:6379"}, nil, []string{"not a URL", "redis://"}},
		{[]string{"--store", "redis://"}, nil, []string{"no host"}},
		{[]string{"--store", "etcd://:2379"}, nil, []string{"no host name"}},
		{[]string{"--store", "redis://h:99999"}, nil, []string{"bad port"}},
		{[]string{"--store", "redis://a:1,b:2"}, nil, []string{"one host", "redis-cluster://"}},
		{[]string{"--store", "redis://h:6379?bogus=1"}, nil, []string{"bogus"}},
		{[]string{"--store", "redis-sentinel://h:26379"}, nil, []string{"master's name is missing"}},
		{[]string{"--store", "mysql://u@h:3306"}, nil, []string{"database is missing"}},
		{[]string{"--store", "etcd://h:2379?bogus=1"}, nil, []string{"unknown parameter bogus"}},
		{[]string{"--store", "zk://h:2181/a?root=/b"}, nil, []string{"two roots"}},
		{[]string{"--store", "redis://h:6379", "--prefix", "a{b"}, nil, []string{"must not contain"}},
		{[]string{"--store", "redis://u:secret@h:6379?prefix=a}"}, nil, []string{"must not contain", "xxxxx"}},
		{nil, nil, []string{"no store given", "REQLOCK_STORE", "REDIS_ADDR", "MYSQL_DSN", "redis://"}},
		{nil, map[string]string{"REDIS_ADDR": "h:6379", "DATABASE_URL": "postgres://h/db"}, []string{"REDIS_ADDR and DATABASE_URL are all set", "--store"}},
		{nil, map[string]string{"MYSQL_DSN": "not a dsn"}, []string{"MYSQL_DSN"}},
	} {
		r := reqlock(t, nil, c.env, append([]string{"ls"}, c.args...)...)
		if r.code != exitUsage {
			t.Errorf("ls %q (env %v): want exit 2\n%v", c.args, c.env, r)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("ls %q (env %v): the error does not say %q\n%v", c.args, c.env, w, r)
			}
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("ls %q: the error shows the password\n%v", c.args, r)
		}
	}
}

// TestUsage: a bad command line is exit 2, with a word on what is wrong;
// help is exit 0.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"ls", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"ls", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"show"}, "accepts 1 arg"},
		{[]string{"ls", "--limit", "0", "--store", "redis://h:1"}, "--limit 0"},
		{[]string{"ls", "--limit", "1001", "--store", "redis://h:1"}, "--limit 1001"},
		{[]string{"watch", "--interval", "0s", "--store", "redis://h:1"}, "--interval 0s"},
		{[]string{"ls", "--timeout", "0s", "--store", "redis://h:1"}, "--timeout 0s"},
		{[]string{"release", "order:1", "--store", "redis://h:1"}, "refused without --force"},
	} {
		r := reqlock(t, nil, nil, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("reqlock %q: want exit 2 saying %q\n%v", c.args, c.want, r)
		}
	}
	if r := reqlock(t, nil, nil, "--help"); r.code != 0 || !strings.Contains(r.stdout, "redis-sentinel://") {
		t.Errorf("reqlock --help: want exit 0 and the store URLs\n%v", r)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableStore: a store that does not answer fails the command
// (exit 1) within --timeout, with an error that names the store.
func TestUnreachableStore(t *testing.T) {
	testmain.LeakCheck(t)
	addr := closedPort(t)
	for _, c := range []struct{ url, want string }{
		{"redis://" + addr, "redis at " + addr},
		{"redis-cluster://" + addr, "redis-cluster at " + addr},
		{"redis-sentinel://" + addr + "/mymaster", "redis-sentinel mymaster at " + addr},
		{"redlock://" + addr + "," + addr + "," + addr, "redlock at " + addr},
		{"etcd://" + addr, "etcd at " + addr},
		{"zk://" + addr, "zookeeper at " + addr},
		{"postgres://u:secret@" + addr + "/db", "postgres://u:xxxxx@" + addr + "/db"},
		{"mysql://u:secret@" + addr + "/db", "mysql://u:xxxxx@" + addr + "/db"},
		{"memcached://" + addr, "memcached at " + addr},
	} {
		r := reqlock(t, nil, nil, "show", "order:1", "--store", c.url, "--timeout", "2s")
		if r.code != exitError || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "secret") {
			t.Errorf("show on %s (nothing listens): want exit 1 naming %q\n%v", c.url, c.want, r)
		}
	}
	// The environment's store, the same.
	r := reqlock(t, nil, map[string]string{"REDIS_ADDR": addr}, "ls", "--timeout", "2s")
	if r.code != exitError || !strings.Contains(r.stderr, "redis at "+addr) {
		t.Errorf("ls on REDIS_ADDR=%s (nothing listens): want exit 1 naming it\n%v", addr, r)
	}
}

// TestParseStore: the options that name the locks come from the flags,
// else the URL, else the stores' defaults (the service's, when it sets
// none); the URL's parts reach the clients.
func TestParseStore(t *testing.T) {
	flags := func(set map[string]string) storeOptions {
		o := storeOptions{set: map[string]bool{}}
		for k, v := range set {
			o.set[k] = true
			switch k {
			case "prefix":
				o.Prefix = v
			case "table":
				o.Table = v
			case "root":
				o.Root = v
			case "etcd-prefix":
				o.EtcdPrefix = v
			}
		}
		return o
	}
	parse := func(raw string, o storeOptions) *storeSpec {
		t.Helper()
		s, err := parseStore(raw, o, 3*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return s
	}
	none := flags(nil)
	if s := parse("redis://h:1/2", none); s.prefix != core.DefaultPrefix || s.redis.Addr != "h:1" || s.redis.DB != 2 || s.redis.DialTimeout != 3*time.Second || !s.redis.ContextTimeoutEnabled {
		t.Errorf("redis://h:1/2: %+v %+v", s, s.redis)
	}
	if s := parse("rediss://u:p@h", none); s.redis.TLSConfig == nil || s.redis.Addr != "h:6379" || s.redis.Username != "u" || s.redis.Password != "p" {
		t.Errorf("rediss://u:p@h: %+v", s.redis)
	}
	if s := parse("redis://h:1?prefix=svc:", none); s.prefix != "svc:" {
		t.Errorf("?prefix=svc: gave %q", s.prefix)
	}
	if s := parse("redis://h:1?prefix=svc:", flags(map[string]string{"prefix": ""})); s.prefix != "" {
		t.Errorf("--prefix '' over ?prefix=svc: gave %q", s.prefix)
	}
	s := parse("redis-sentinel://u:p@a:1,b:2/mymaster?db=3&sentinel_password=sp", none)
	if o := s.failover; o.MasterName != "mymaster" || strings.Join(o.SentinelAddrs, ",") != "a:1,b:2" || o.DB != 3 ||
		o.Username != "u" || o.Password != "p" || o.SentinelPassword != "sp" {
		t.Errorf("redis-sentinel: %+v", o)
	}
	if s := parse("redis-cluster://a:1,b:2,c", none); strings.Join(s.cluster.Addrs, ",") != "a:1,b:2,c:6379" {
		t.Errorf("redis-cluster: %v", s.cluster.Addrs)
	}
	if s := parse("redlock://u:p@a,b:2,c/1", none); len(s.redlock) != 3 || s.redlock[1].Addr != "b:2" || s.redlock[2].DB != 1 || s.redlock[0].Password != "p" {
		t.Errorf("redlock: %v", s.redlock)
	}
	if s := parse("etcd://a,b:1", none); s.etcdPfx != etcdstore.DefaultPrefix || strings.Join(s.etcd.Endpoints, ",") != "a:2379,b:1" {
		t.Errorf("etcd: %q %v", s.etcdPfx, s.etcd.Endpoints)
	}
	if s := parse("etcd://a?etcd_prefix=/x/", none); s.etcdPfx != "/x/" {
		t.Errorf("etcd ?etcd_prefix: %q", s.etcdPfx)
	}
	if s := parse("zk://a", none); s.root != zkstore.DefaultRoot || s.hosts[0] != "a:2181" {
		t.Errorf("zk: %q %v", s.root, s.hosts)
	}
	if s := parse("zk://a/services/locks/", none); s.root != "/services/locks" {
		t.Errorf("zk with a root: %q", s.root)
	}
	if s := parse("zk://a/x", flags(map[string]string{"root": "/y"})); s.root != "/y" {
		t.Errorf("zk --root over the path: %q", s.root)
	}
	if s := parse("postgres://u:p@h/db?sslmode=disable", none); s.table != sqlstore.DefaultTable || s.driver != "pgx" ||
		!strings.Contains(s.dsn, "connect_timeout=3") || !strings.Contains(s.dsn, "sslmode=disable") || strings.Contains(s.where, ":p@") {
		t.Errorf("postgres: %+v", s)
	}
	if s := parse("postgresql://h/db?table=t2", none); s.table != "t2" || strings.Contains(s.dsn, "table=") {
		t.Errorf("postgresql ?table: %+v", s)
	}
	if s := parse("mysql://u:p@h/db?table=t3&charset=utf8mb4", none); s.table != "t3" || s.driver != "mysql" ||
		!strings.HasPrefix(s.dsn, "u:p@tcp(h:3306)/db?") || !strings.Contains(s.dsn, "charset=utf8mb4") {
		t.Errorf("mysql: %+v", s)
	}
	if s := parse("mysql-dsn:u:p@tcp(h:3307)/db", none); s.dsn == "" || s.hosts[0] != "h:3307" || s.table != sqlstore.DefaultTable {
		t.Errorf("MYSQL_DSN: %+v", s)
	}
	if s := parse("memcached://a,b:2", none); strings.Join(s.hosts, ",") != "a:11211,b:2" {
		t.Errorf("memcached: %v", s.hosts)
	}
	if s := parse("redis://[::1]:7", none); s.redis.Addr != "[::1]:7" {
		t.Errorf("IPv6: %v", s.redis.Addr)
	}
}

// plainStore is a Store with none of the optional capabilities: not an
// Inspector.
type plainStore struct{ core.Store }

// TestNoInspector: a store that cannot list or inspect its locks is named
// in core.ErrNoInspector's message.
func TestNoInspector(t *testing.T) {
	srv := redisServer(t)
	testmain.LeakCheck(t)
	client := redis.NewClient(srv.Options())
	defer client.Close()
	store := core.NewRedisStore(client)
	defer closeStore(store)()
	c := &conn{locker: core.NewWithStore(plainStore{store}), where: "redis at somewhere"}
	_, err := list(context.Background(), c, "", "", 10, 10)
	if err == nil || !strings.Contains(err.Error(), core.ErrNoInspector.Error()) || !strings.Contains(err.Error(), "redis at somewhere") {
		t.Errorf("list on a store that is not an Inspector: %v", err)
	}
	if _, err := inspectAll(context.Background(), c, []string{"x"}); err == nil || !strings.Contains(err.Error(), core.ErrNoInspector.Error()) {
		t.Errorf("inspect on a store that is not an Inspector: %v", err)
	}
}

// TestRedact: passwords never reach a message or the audit log.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:1/0":                              "redis://u:xxxxx@h:1/0",
		"redis://:secret@h:1":                                 "redis://:xxxxx@h:1",
		"redis-cluster://u:secret@a,b:2":                      "redis-cluster://u:xxxxx@a,b:2",
		"redis-sentinel://a:1/m?sentinel_password=secret&x=1": "redis-sentinel://a:1/m?sentinel_password=xxxxx&x=1",
		"postgres://h/db?password=secret":                     "postgres://h/db?password=xxxxx",
		"mysql-dsn:u:secret@tcp(h:3306)/db":                   "MYSQL_DSN u:xxxxx@tcp(h:3306)/db",
		"redis://h:1":                                         "redis://h:1",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClean: text read from a store cannot drive the terminal.
func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"/orders/:id":     "/orders/:id",
		"a\x1b[2Jb":       `a\x1b[2Jb`,
		"tab\there":       `tab\there`,
		"línea ünïcode":   "línea ünïcode",
		"new\nline\rback": `new\nline\rback`,
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestStoreOptions: the settings that name the locks (core's prefix, the
// etcd prefix, the ZooKeeper root, the SQL table) reach the store, as flags
// and as URL parameters: a service that changed one is found with it, and
// not without it.
func TestStoreOptions(t *testing.T) {
	redisSrv, etcdSrv, zkSrv, pgSrv := redisServer(t), etcdServer(t), zkServer(t), pgServer(t)
	testmain.LeakCheck(t)
	ctx := context.Background()
	p := uniq(t)
	root := "/other-" + strings.TrimSuffix(p, ":")
	for _, c := range []struct {
		name   string
		store  func(t *testing.T) core.Store
		prefix string // the Locker's
		url    string
		found  [][]string // extra arguments that find the lock
	}{
		{"redis", func(t *testing.T) core.Store {
			c := redis.NewClient(redisSrv.Options())
			t.Cleanup(func() { _ = c.Close() })
			return redisStore(t, c)
		}, "svc:", "redis://" + redisSrv.Addr(), [][]string{
			{"--prefix", "svc:"},
			{"--store", "redis://" + redisSrv.Addr() + "?prefix=svc:"},
		}},
		{"etcd", func(t *testing.T) core.Store {
			return etcdStoreOn(t, etcdSrv.Addr(), etcdstore.WithPrefix("/other/"))
		}, core.DefaultPrefix, "etcd://" + etcdSrv.Addr(), [][]string{
			{"--etcd-prefix", "/other/"},
			{"--store", "etcd://" + etcdSrv.Addr() + "?etcd_prefix=/other/"},
		}},
		{"zookeeper", func(t *testing.T) core.Store {
			return zkStoreOn(t, zkSrv.Addr(), zkstore.WithRoot(root))
		}, core.DefaultPrefix, "zk://" + zkSrv.Addr(), [][]string{
			{"--root", root},
			{"--store", "zk://" + zkSrv.Addr() + root},
		}},
		{"postgres", func(t *testing.T) core.Store {
			return sqlStore(t, "pgx", servers.PostgresURL(pgSrv.Addr()), sqlstore.WithTable("other_locks"))
		}, core.DefaultPrefix, servers.PostgresURL(pgSrv.Addr()), [][]string{
			{"--table", "other_locks"},
			{"--store", servers.PostgresURL(pgSrv.Addr()) + "&table=other_locks"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := core.NewWithStore(c.store(t), core.WithPrefix(c.prefix), core.WithTTL(30*time.Second))
			defer l.Close()
			lease, err := l.Acquire(ctx, p+"a")
			if err != nil {
				t.Fatal(err)
			}
			defer lease.Release(ctx)
			if r := reqlock(t, nil, nil, "ls", p, "--store", c.url, "--timeout", "20s"); strings.Contains(r.stdout, p+"a") {
				t.Errorf("ls with the defaults found the lock of a service that changed them:\n%v", r)
			}
			for _, extra := range c.found {
				args := append([]string{"ls", p, "--store", c.url, "--timeout", "20s"}, extra...)
				if r := reqlock(t, nil, nil, args...); r.code != 0 || strings.TrimSpace(r.stdout) != p+"a" {
					t.Errorf("reqlock %q: want %s\n%v", args, p+"a", r)
				}
			}
		})
	}
}

// TestWatchOnTerminal: on a terminal, watch clears the screen before each
// frame.
func TestWatchOnTerminal(t *testing.T) {
	srv := redisServer(t)
	testmain.LeakCheck(t)
	var out strings.Builder
	code := run(context.Background(), []string{"watch", uniq(t), "--count", "2", "--interval", "50ms", "--store", "redis://" + srv.Addr()}, env{
		stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }, now: time.Now,
		terminal: func(any) bool { return true }, operator: func() string { return testOperator },
	})
	if code != 0 || strings.Count(out.String(), "\x1b[H\x1b[2J") != 2 || strings.Count(out.String(), "0 held") != 2 {
		t.Errorf("watch on a terminal: exit %d, want two cleared frames:\n%q", code, out.String())
	}
}
