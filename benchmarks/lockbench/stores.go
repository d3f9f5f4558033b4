package lockbench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/servers"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
	rueidisstore "github.com/reqlock/reqlock/stores/rueidis"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// StoreKind is a store that the stores section runs reqlock's Locker on:
// its server, which the runner starts, and the client a worker process
// opens on it.
type StoreKind struct {
	// Name labels the store's rows and selects it (Params.Stores).
	Name string
	// Client names the Go client and the reqlock store, for the README.
	Client string
	// Server says what the runner starts and how it is configured, for the
	// README.
	Server string
	// Queuer is set for the stores that implement core.Queuer: they also
	// run with core.WithFair.
	Queuer bool
	// spec is the server that the runner starts (internal/servers); nil
	// for the stores on the benchmark's own redis-server.
	spec func() servers.Spec
	// prepare runs once in the runner, on the server's own address (not the
	// proxy's), before any worker starts: it creates what the store needs
	// (a database, the lock table) and returns the server's version.
	prepare func(ctx context.Context, addr string) (version string, err error)
	// Requests says how the worker counts the requests its client sends
	// (into the RoundTrips it is given), for the README; empty when it does
	// not count them.
	Requests string
	// open connects a worker process to the store through addr, the
	// delaying proxy in front of the server, counting the client's requests
	// in rt where Requests says how.
	open func(ctx context.Context, addr string, rt *RoundTrips) (*storeConn, error)
}

// storeConn is a worker process's connection to a store: either a core.Store
// for core.NewWithStore, or, for the Redis reference row, a go-redis client
// for core.New.
type storeConn struct {
	store  core.Store
	client *redis.Client
	close  func()
}

// StoreSettings are the reqlock settings of the stores section, by the names
// of their rows in the main tables: the default, the best setting without
// the fair queue, and (on a core.Queuer) the fair queue.
var StoreSettings = []string{"reqlock", fmt.Sprintf("reqlock+hotspot+handoff%d", HandoffK), Fair}

// Runs reports whether setting runs on the store: the fair queue only on a
// core.Queuer.
func (k StoreKind) Runs(setting string) bool { return k.Queuer || setting != Fair }

// RedisStore is the reference row of the stores section: core.New on
// go-redis, as in every other table.
const RedisStore = "redis"

// mariaDatabase is the database the MariaDB rows keep their table in.
const mariaDatabase = "reqlock"

// storeIdleConns is the idle connections kept by the clients that keep a
// pool (database/sql, gomemcache), whose defaults (2) would close and dial
// again the connections of a process's fourth goroutine.
const storeIdleConns = 16

// Stores are the stores of the stores section, in table order: the Redis
// reference row first.
var Stores = []StoreKind{
	{
		Name: RedisStore, Queuer: true,
		Client:   "github.com/redis/go-redis/v9, core.New (the store of every other table)",
		Server:   "the benchmark's redis-server (no persistence)",
		Requests: "a go-redis hook: one per command or pipeline, and the SUBSCRIBE and UNSUBSCRIBE calls Redis counted",
		open: func(_ context.Context, addr string, rt *RoundTrips) (*storeConn, error) {
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
			c.AddHook(rt)
			return &storeConn{client: c, close: func() { _ = c.Close() }}, nil
		},
	},
	{
		Name: "rueidis", Queuer: true,
		Client:   "github.com/redis/rueidis, stores/rueidis",
		Server:   "the benchmark's redis-server (no persistence)",
		Requests: "a wrapper of the rueidis client: one per Do or DoMulti, and the SUBSCRIBE and UNSUBSCRIBE calls Redis counted",
		open:     openRueidisStore,
	},
	{
		Name:     "etcd",
		Client:   "go.etcd.io/etcd/client/v3, stores/etcd",
		Server:   "etcd, one member, heartbeat 10 ms and election timeout 100 ms, its write-ahead log synced to disk at every commit (fsync on)",
		Requests: "gRPC interceptors: one per unary call and one per message sent on a stream (a lease keep-alive, a watch)",
		spec:     servers.EtcdSpec, prepare: etcdVersion, open: openEtcdStore,
	},
	{
		Name: "zookeeper", Queuer: true,
		Client:   "github.com/go-zookeeper/zk, stores/zookeeper",
		Server:   "ZooKeeper standalone, tickTime 50 ms, its transaction log not synced (zookeeper.forceSync=no)",
		Requests: "the connection the client writes to: one per request packet, the session's pings left out",
		spec:     servers.ZooKeeperSpec, prepare: zooKeeperVersion, open: openZooKeeperStore,
	},
	{
		Name:   "postgres",
		Client: "github.com/jackc/pgx/v5/stdlib (database/sql), stores/sql",
		Server: "PostgreSQL with fsync=off and full_page_writes=off",
		spec:   servers.PostgresSpec, prepare: preparePostgres, open: openPostgresStore,
	},
	{
		Name:   "mariadb",
		Client: "github.com/go-sql-driver/mysql (database/sql), stores/sql",
		Server: "MariaDB, InnoDB without doublewrite, its log written at each commit but flushed once a second (innodb-flush-log-at-trx-commit=2), no binary log",
		spec:   servers.MariaDBSpec, prepare: prepareMariaDB, open: openMariaDBStore,
	},
	{
		Name:   "memcached",
		Client: "github.com/bradfitz/gomemcache, stores/memcached",
		Server: "memcached (memory only)",
		spec:   func() servers.Spec { return servers.MemcachedSpec() }, prepare: memcachedVersion, open: openMemcachedStore,
	},
}

// LookupStores returns the stores named in list ("" or "all" for all), in
// table order.
func LookupStores(list []string) ([]StoreKind, error) {
	if len(list) == 0 || len(list) == 1 && (list[0] == "" || list[0] == "all") {
		return Stores, nil
	}
	var out []StoreKind
	for _, k := range Stores {
		for _, name := range list {
			if strings.TrimSpace(name) == k.Name {
				out = append(out, k)
				break
			}
		}
	}
	for _, name := range list {
		if _, ok := findStore(strings.TrimSpace(name)); !ok {
			return nil, fmt.Errorf("lockbench: unknown store %q (%s)", name, strings.Join(storeNames(), ", "))
		}
	}
	return out, nil
}

func storeNames() []string {
	out := make([]string, len(Stores))
	for i, k := range Stores {
		out[i] = k.Name
	}
	return out
}

func findStore(name string) (StoreKind, bool) {
	for _, k := range Stores {
		if k.Name == name {
			return k, true
		}
	}
	return StoreKind{}, false
}

func openRueidisStore(_ context.Context, addr string, rt *RoundTrips) (*storeConn, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true})
	if err != nil {
		return nil, err
	}
	s, err := rueidisstore.New(countedRueidis{Client: c, rt: rt})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &storeConn{store: s, close: func() { _ = s.Close(); c.Close() }}, nil
}

func openEtcdStore(_ context.Context, addr string, rt *RoundTrips) (*storeConn, error) {
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{addr},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{
			// Fixed flow-control windows turn off gRPC's bandwidth
			// estimation, whose pings after the replies would count as
			// exchanges at the proxy; the lock's messages are far smaller.
			grpc.WithInitialWindowSize(1 << 20), grpc.WithInitialConnWindowSize(1 << 20),
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				rt.Add(1)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				s, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, err
				}
				return countedStream{s, rt}, nil
			}),
		},
	})
	if err != nil {
		return nil, err
	}
	s, err := etcdstore.New(c)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &storeConn{store: s, close: func() { _ = s.Close(); _ = c.Close() }}, nil
}

// countedStream counts the messages sent on a gRPC stream.
type countedStream struct {
	grpc.ClientStream
	rt *RoundTrips
}

func (s countedStream) SendMsg(m any) error {
	s.rt.Add(1)
	return s.ClientStream.SendMsg(m)
}

// countedZKConn counts the request packets go-zookeeper writes (one Write
// each: a 4-byte length, then the request's xid), leaving out the pings
// (xid -2) that keep the session alive.
type countedZKConn struct {
	net.Conn
	rt *RoundTrips
}

func (c countedZKConn) Write(b []byte) (int, error) {
	if len(b) < 8 || int32(binary.BigEndian.Uint32(b[4:8])) != zkPingXid {
		c.rt.Add(1)
	}
	return c.Conn.Write(b)
}

// zkPingXid is the xid of ZooKeeper's ping requests.
const zkPingXid = -2

// zkQuiet drops go-zookeeper's log lines.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

func openZooKeeperStore(ctx context.Context, addr string, rt *RoundTrips) (*storeConn, error) {
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return countedZKConn{c, rt}, nil
	}
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithDialer(dial), zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for conn.State() != zk.StateHasSession {
		if ctx.Err() != nil {
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session at %s within 10s (state %v)", addr, conn.State())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s, err := zkstore.New(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &storeConn{store: s, close: func() { _ = s.Close(); conn.Close() }}, nil
}

// openSQLStore opens the lock table of the database behind dsn.
func openSQLStore(driver, dsn string) (*storeConn, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(storeIdleConns)
	s, err := sqlstore.New(db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &storeConn{store: s, close: func() { _ = s.Close(); _ = db.Close() }}, nil
}

func openPostgresStore(_ context.Context, addr string, _ *RoundTrips) (*storeConn, error) {
	return openSQLStore("pgx", servers.PostgresURL(addr))
}

func openMariaDBStore(_ context.Context, addr string, _ *RoundTrips) (*storeConn, error) {
	_ = mysql.SetLogger(mariaQuiet{})
	return openSQLStore("mysql", mariaDSN(addr, mariaDatabase))
}

func mariaDSN(addr, database string) string {
	return servers.MariaDBUser + "@tcp(" + addr + ")/" + database
}

func openMemcachedStore(_ context.Context, addr string, _ *RoundTrips) (*storeConn, error) {
	c := memcache.New(addr)
	c.MaxIdleConns = storeIdleConns
	s, err := memcachedstore.New(c)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &storeConn{store: s, close: func() { _ = s.Close(); _ = c.Close() }}, nil
}

// createTable creates the lock table of the database behind db.
func createTable(ctx context.Context, db *sql.DB) error {
	s, err := sqlstore.New(db)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.CreateTable(ctx)
}

func preparePostgres(ctx context.Context, addr string) (string, error) {
	db, err := sql.Open("pgx", servers.PostgresURL(addr))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if err := createTable(ctx, db); err != nil {
		return "", err
	}
	var version string
	err = db.QueryRowContext(ctx, "SHOW server_version").Scan(&version)
	return version, err
}

// mariaQuiet drops go-sql-driver/mysql's log lines.
type mariaQuiet struct{}

func (mariaQuiet) Print(...any) {}

func prepareMariaDB(ctx context.Context, addr string) (string, error) {
	_ = mysql.SetLogger(mariaQuiet{})
	root, err := sql.Open("mysql", mariaDSN(addr, ""))
	if err != nil {
		return "", err
	}
	defer root.Close()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+mariaDatabase); err != nil {
		return "", err
	}
	var version string
	if err := root.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", err
	}
	db, err := sql.Open("mysql", mariaDSN(addr, mariaDatabase))
	if err != nil {
		return "", err
	}
	defer db.Close()
	return version, createTable(ctx, db)
}

// etcdVersion asks etcd's /version endpoint.
func etcdVersion(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/version", nil)
	if err != nil {
		return "", err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	// {"etcdserver":"3.4.23","etcdcluster":"3.4.0"}
	_, rest, ok := strings.Cut(string(body), `"etcdserver":"`)
	version, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		return "", fmt.Errorf("etcd /version: %q", body)
	}
	return version, nil
}

// zooKeeperVersion sends ZooKeeper's four-letter command srvr, again for
// up to 10 s while the server answers that it is not serving requests yet
// (it answers ruok, its readiness check, before).
func zooKeeperVersion(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var line string
	var err error
	for {
		if line, err = tcpAsk(ctx, addr, "srvr", "Zookeeper version: "); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("zookeeper srvr: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	version, _, _ := strings.Cut(line, "-") // "3.8.0-1, built on ..."
	version, _, _ = strings.Cut(version, ",")
	return version, nil
}

// memcachedVersion sends memcached's version command.
func memcachedVersion(ctx context.Context, addr string) (string, error) {
	return tcpAsk(ctx, addr, "version\r\n", "VERSION ")
}

// tcpAsk sends request to addr and returns the rest of the first line of
// the reply that begins with prefix.
func tcpAsk(ctx context.Context, addr, request, prefix string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), prefix); ok {
			return rest, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("no " + strings.TrimSpace(prefix) + " in the reply")
}
