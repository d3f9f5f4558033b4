package stores

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/rueidis"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/faulthistory/history"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
	rueidisstore "github.com/reqlock/reqlock/stores/rueidis"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// zkSession is the session timeout of the workers' ZooKeeper connections:
// above the TTL (zkstore.WithSessionTimeout) and above the longest stall
// of the faults (the TTL and a little), so that no session expires under
// the faults of the fault model.
const zkSession = 6 * time.Second

// openStore opens the store of a URL, as the workers do (j.Store), and
// builds a Locker on it with opts. The URLs:
//
//	rueidis://host:port                          Redis through rueidis
//	etcd://host:port[,host:port...]              etcd
//	zookeeper://host:port[,host:port...]         ZooKeeper
//	postgres://user@host:port/db?sslmode=disable PostgreSQL (pgx)
//	mysql://user@host:port/db                    MySQL, MariaDB (go-sql-driver/mysql)
//	memcached://host:port[,host:port...]         memcached, fences timed by the first server's clock
//
// closeAll closes the Locker, the store and the client, in that order.
func openStore(j history.Job, opts ...core.Option) (l *core.Locker, closeAll func(), err error) {
	scheme, rest, ok := strings.Cut(j.Store, "://")
	if !ok {
		return nil, nil, fmt.Errorf("not a store URL: %q", j.Store)
	}
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	var store core.Store
	switch scheme {
	case "rueidis":
		client, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{rest}, DisableCache: true,
			Dialer: net.Dialer{Timeout: j.IOTimeout},
		})
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, client.Close)
		s, err := rueidisstore.New(client, rueidisstore.WithIOTimeout(j.IOTimeout))
		if err != nil {
			return nil, nil, err
		}
		store = s
		closers = append(closers, func() { _ = s.Close() })
	case "etcd":
		client, err := clientv3.New(clientv3.Config{
			Endpoints:            strings.Split(rest, ","),
			DialTimeout:          2 * time.Second,
			DialKeepAliveTime:    time.Second,
			DialKeepAliveTimeout: time.Second,
			Logger:               zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
				MinConnectTimeout: time.Second,
			})},
		})
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, func() { _ = client.Close() })
		s, err := etcdstore.New(client)
		if err != nil {
			return nil, nil, err
		}
		store = s
		closers = append(closers, func() { _ = s.Close() })
	case "zookeeper":
		conn, _, err := zk.Connect(strings.Split(rest, ","), zkSession, zk.WithLogger(quietZK{}), zk.WithLogInfo(false),
			zk.WithHostProvider(zkstore.NewHostProvider()), // 250 ms at most between attempts, not go-zookeeper's second
			zk.WithDialer(zkstore.Dial))                    // a server that never answers the handshake is left after the read timeout
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, conn.Close)
		for deadline := time.Now().Add(30 * time.Second); conn.State() != zk.StateHasSession; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				return nil, nil, fmt.Errorf("no ZooKeeper session with %s within 30 s (state %v)", rest, conn.State())
			}
		}
		s, err := zkstore.New(conn, zkstore.WithSessionTimeout(zkSession))
		if err != nil {
			return nil, nil, err
		}
		store = s
		closers = append(closers, func() { _ = s.Close() })
	case "postgres", "mysql":
		driver, dsn := "pgx", j.Store
		if scheme == "mysql" {
			driver = "mysql"
			if dsn, err = mysqlDSN(j.Store); err != nil {
				return nil, nil, err
			}
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(16)
		closers = append(closers, func() { _ = db.Close() })
		s, err := sqlstore.New(db)
		if err != nil {
			return nil, nil, err
		}
		store = s
		closers = append(closers, func() { _ = s.Close() })
	case "memcached":
		addrs := strings.Split(rest, ",")
		client := memcache.New(addrs...)
		client.Timeout = time.Second
		client.MaxIdleConns = 8
		closers = append(closers, func() { _ = client.Close() })
		s, err := memcachedstore.New(client, memcachedstore.WithServerClock(addrs[0]))
		if err != nil {
			return nil, nil, err
		}
		store = s
		closers = append(closers, func() { _ = s.Close() })
	default:
		return nil, nil, fmt.Errorf("unknown store %q in %q", scheme, j.Store)
	}
	l = core.NewWithStore(store, opts...)
	closers = append(closers, func() { _ = l.Close() })
	return l, closeAll, nil
}

// mysqlDSN turns "mysql://user@host:port/db" into go-sql-driver/mysql's
// "user@tcp(host:port)/db", with a dial timeout of a second.
func mysqlDSN(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	if p.Host == "" || p.User == nil {
		return "", errors.New("want mysql://user@host:port/db: " + u)
	}
	cfg := mysql.NewConfig()
	cfg.User = p.User.Username()
	cfg.Passwd, _ = p.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", p.Host, strings.TrimPrefix(p.Path, "/")
	cfg.Timeout = time.Second
	return cfg.FormatDSN(), nil
}

// quietZK drops go-zookeeper's log lines (reconnections while a fault has
// the server away); the workers record the errors that reach them.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// quietMySQL drops go-sql-driver/mysql's log lines (broken connections).
type quietMySQL struct{}

func (quietMySQL) Print(...any) {}
