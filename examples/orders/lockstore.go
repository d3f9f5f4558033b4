package main

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/bradfitz/gomemcache/memcache"
	_ "github.com/go-sql-driver/mysql" // the "mysql" database/sql driver
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reqlock/reqlock/core"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// The stores the service can keep its locks in (-store), each with the
// environment variable that gives its address when -store-addr does not.
var storeEnv = map[string]string{
	"redis":     "REDIS_ADDR",        // host:port; unset: an embedded miniredis
	"etcd":      "ETCD_ENDPOINTS",    // host:port[,host:port...]
	"zookeeper": "ZOOKEEPER_SERVERS", // host:port[,host:port...]
	"postgres":  "DATABASE_URL",      // postgres://user:password@host:port/db
	"mysql":     "MYSQL_DSN",         // user:password@tcp(host:port)/db (go-sql-driver/mysql)
	"memcached": "MEMCACHED_SERVERS", // host:port[,host:port...]
}

// storeNames lists the -store values, for messages.
func storeNames() string {
	names := make([]string, 0, len(storeEnv))
	for n := range storeEnv {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

// lockStore is the store the Locker keeps its locks in, and what to close
// when the service stops (last first).
type lockStore struct {
	store   core.Store
	where   string // for the banner
	cli     string // the reqlock command's --store flag for it, for the banner
	closers []func()
}

// openStore connects to the store that cfg names. Only Redis has a default:
// an embedded miniredis when no address is set. The SQL stores create their
// lock table if it is missing (sqlstore's migration, applied on request:
// here the service asks for it at start-up).
func openStore(ctx context.Context, cfg Config) (_ *lockStore, err error) {
	ls := &lockStore{}
	defer func() {
		if err != nil {
			ls.close()
		}
	}()
	if _, ok := storeEnv[cfg.Store]; !ok {
		return nil, fmt.Errorf("-store %q: want one of %s", cfg.Store, storeNames())
	}
	addr := cfg.StoreAddr
	if addr == "" && cfg.Store != "redis" {
		return nil, fmt.Errorf("-store %s needs the server's address: set -store-addr or %s", cfg.Store, storeEnv[cfg.Store])
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch cfg.Store {
	case "redis":
		ls.where = "redis at " + addr
		if addr == "" {
			mr, err := miniredis.Run()
			if err != nil {
				return nil, err
			}
			ls.closers = append(ls.closers, mr.Close)
			addr, ls.where = mr.Addr(), "embedded miniredis (set REDIS_ADDR, or -store and -store-addr, to use a real store)"
		}
		client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		ls.closers = append(ls.closers, func() { _ = client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("redis at %s: %w", addr, err)
		}
		ls.store, ls.cli = core.NewRedisStore(client), "--store redis://"+addr
		ls.closers = append(ls.closers, closeStore(ls.store))
	case "etcd":
		client, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(addr, ","), DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, fmt.Errorf("etcd at %s: %w", addr, err)
		}
		ls.closers = append(ls.closers, func() { _ = client.Close() })
		if _, err := client.Get(ctx, "health"); err != nil {
			return nil, fmt.Errorf("etcd at %s: %w", addr, err)
		}
		s, err := etcdstore.New(client)
		if err != nil {
			return nil, err
		}
		ls.store, ls.where, ls.cli = s, "etcd at "+addr, "--store etcd://"+addr
		ls.closers = append(ls.closers, func() { _ = s.Close() })
	case "zookeeper":
		conn, events, err := zk.Connect(strings.Split(addr, ","), 10*time.Second, zk.WithLogInfo(false),
			zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
		if err != nil {
			return nil, fmt.Errorf("zookeeper at %s: %w", addr, err)
		}
		ls.closers = append(ls.closers, conn.Close)
		if err := waitConnected(ctx, events); err != nil {
			return nil, fmt.Errorf("zookeeper at %s: %w", addr, err)
		}
		s, err := zkstore.New(conn)
		if err != nil {
			return nil, err
		}
		ls.store, ls.where, ls.cli = s, "zookeeper at "+addr, "--store zk://"+addr
		ls.closers = append(ls.closers, closeStore(s))
	case "postgres", "mysql":
		driver := map[string]string{"postgres": "pgx", "mysql": "mysql"}[cfg.Store]
		db, err := sql.Open(driver, addr) // pgx's database/sql driver, go-sql-driver/mysql
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Store, err)
		}
		// Bound the pool: every waiting request holds a connection for one
		// statement at a time, and a burst of them would otherwise open more
		// connections than the server takes (PostgreSQL's max_connections is
		// 100 by default), which the lock reports as a storage error (503).
		db.SetMaxOpenConns(16)
		ls.closers = append(ls.closers, func() { _ = db.Close() })
		s, err := sqlstore.New(db)
		if err != nil {
			return nil, err
		}
		if err := s.CreateTable(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Store, err)
		}
		ls.store, ls.where = s, fmt.Sprintf("%s (table %s)", cfg.Store, s.Table())
		ls.cli = "--table " + s.Table() + " (and " + storeEnv[cfg.Store] + " set, or --store URL)"
		ls.closers = append(ls.closers, func() { _ = s.Close() })
	case "memcached":
		client := memcache.New(strings.Split(addr, ",")...)
		ls.closers = append(ls.closers, func() { _ = client.Close() })
		if err := client.Ping(); err != nil {
			return nil, fmt.Errorf("memcached at %s: %w", addr, err)
		}
		s, err := memcachedstore.New(client)
		if err != nil {
			return nil, err
		}
		ls.store, ls.where, ls.cli = s, "memcached at "+addr, "--store memcached://"+addr
		ls.closers = append(ls.closers, closeStore(s))
	default:
		return nil, fmt.Errorf("-store %q: want one of %s", cfg.Store, storeNames())
	}
	return ls, nil
}

// waitConnected waits until a ZooKeeper connection has a session.
func waitConnected(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("no session: %w", ctx.Err())
		}
	}
}

// closeStore returns a func that closes s if it has a Close method.
func closeStore(s core.Store) func() {
	return func() {
		if c, ok := s.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
}

// close closes what openStore opened, last first.
func (ls *lockStore) close() {
	for i := len(ls.closers) - 1; i >= 0; i-- {
		ls.closers[i]()
	}
	ls.closers = nil
}
