package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/reqlock/reqlock/core"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	memcachedstore "github.com/reqlock/reqlock/stores/memcached"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// errBadStore marks a store address the command cannot use: a bad URL, an
// unknown scheme, a missing host, a bad option. It is a usage error (exit
// status 2).
var errBadStore = errors.New("reqlock: bad store")

// kind is a family of stores, as the URL's scheme names it.
type kind string

const (
	kindRedis     kind = "redis"
	kindSentinel  kind = "redis-sentinel"
	kindCluster   kind = "redis-cluster"
	kindRedlock   kind = "redlock"
	kindEtcd      kind = "etcd"
	kindZooKeeper kind = "zookeeper"
	kindPostgres  kind = "postgres"
	kindMySQL     kind = "mysql"
	kindMemcached kind = "memcached"
)

// scheme is one URL scheme the command knows.
type scheme struct {
	name    string
	kind    kind
	tls     bool
	port    string // the default port
	example string // for the list of schemes in error messages and help
}

// schemes are the store URLs the command reaches, in the order help lists
// them.
var schemes = []scheme{
	{"redis", kindRedis, false, "6379", "redis://[user:pass@]host:port[/db]"},
	{"rediss", kindRedis, true, "6379", "rediss://[user:pass@]host:port[/db] (TLS)"},
	{"redis-sentinel", kindSentinel, false, "26379", "redis-sentinel://[user:pass@]host:port[,host:port...]/mastername[?db=N]"},
	{"rediss-sentinel", kindSentinel, true, "26379", "rediss-sentinel://... (TLS)"},
	{"redis-cluster", kindCluster, false, "6379", "redis-cluster://[user:pass@]host:port[,host:port...]"},
	{"rediss-cluster", kindCluster, true, "6379", "rediss-cluster://... (TLS)"},
	{"redlock", kindRedlock, false, "6379", "redlock://[user:pass@]host:port,host:port,host:port[/db] (core.NewRedlock's independent masters)"},
	{"etcd", kindEtcd, false, "2379", "etcd://[user:pass@]host:port[,host:port...][?etcd_prefix=/reqlock/]"},
	{"etcds", kindEtcd, true, "2379", "etcds://... (TLS)"},
	{"zk", kindZooKeeper, false, "2181", "zk://host:port[,host:port...][/root]"},
	{"postgres", kindPostgres, false, "5432", "postgres://user:pass@host:port/db[?table=reqlock_locks&sslmode=...]"},
	{"postgresql", kindPostgres, false, "5432", "postgresql://... (as postgres://)"},
	{"mysql", kindMySQL, false, "3306", "mysql://user:pass@host:port/db[?table=reqlock_locks&tls=...]"},
	{"memcached", kindMemcached, false, "11211", "memcached://host:port[,host:port...]"},
}

// schemeNames lists the schemes, for error messages.
func schemeNames() string {
	names := make([]string, len(schemes))
	for i, s := range schemes {
		names[i] = s.name + "://"
	}
	return strings.Join(names, ", ")
}

// envStores are the environment variables that give a store's address when
// neither --store nor REQLOCK_STORE does: those of the orders example
// (examples/orders/lockstore.go), so that an operator of a service set up
// that way needs nothing more.
var envStores = []struct {
	name string
	url  func(v string) string // the store URL for the variable's value
}{
	{"REDIS_ADDR", func(v string) string { return "redis://" + v }},
	{"ETCD_ENDPOINTS", func(v string) string { return "etcd://" + v }},
	{"ZOOKEEPER_SERVERS", func(v string) string { return "zk://" + v }},
	{"DATABASE_URL", func(v string) string { return v }},
	{"MYSQL_DSN", nil}, // go-sql-driver/mysql's DSN, not a URL: parsed as such
	{"MEMCACHED_SERVERS", func(v string) string { return "memcached://" + v }},
}

// storeOptions are the settings that must match the service's for the
// command to find its locks: core's key prefix and each store's own
// namespace. An empty field keeps the default (the URL's, else the
// package's).
type storeOptions struct {
	Prefix     string // core.WithPrefix (default core.DefaultPrefix)
	Table      string // sqlstore.WithTable (default sqlstore.DefaultTable)
	Root       string // zkstore.WithRoot (default zkstore.DefaultRoot)
	EtcdPrefix string // etcdstore.WithPrefix (default etcdstore.DefaultPrefix)
	// set records which of them were given (a flag may set one to "").
	set map[string]bool
}

// storeSpec is a parsed store address: what to connect to and how.
type storeSpec struct {
	kind    kind
	where   string   // the address for messages, without a password
	hosts   []string // host:port of each server
	prefix  string   // core's prefix
	table   string   // SQL
	root    string   // ZooKeeper
	etcdPfx string   // etcd

	redis    *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	redlock  []*redis.Options // one per master
	etcd     clientv3.Config
	dsn      string // SQL: the driver's data source name
	driver   string // SQL: "pgx" or "mysql"
}

// resolveStore returns the store address to use: flag (--store), else the
// environment's REQLOCK_STORE, else the variable of envStores that is set.
// Several of those set at once is an error: the command does not guess
// which store a service uses.
func resolveStore(flag string, getenv func(string) string) (raw, from string, err error) {
	if flag != "" {
		return flag, "--store", nil
	}
	if v := getenv("REQLOCK_STORE"); v != "" {
		return v, "REQLOCK_STORE", nil
	}
	var set []string
	for _, e := range envStores {
		if v := getenv(e.name); v != "" {
			set = append(set, e.name)
			if e.url == nil {
				raw = "mysql-dsn:" + v
			} else {
				raw = e.url(v)
			}
			from = e.name
		}
	}
	names := make([]string, len(envStores))
	for i, e := range envStores {
		names[i] = e.name
	}
	switch len(set) {
	case 0:
		return "", "", fmt.Errorf("%w: no store given: pass --store URL or set REQLOCK_STORE (or one of %s); URLs: %s",
			errBadStore, strings.Join(names, ", "), schemeNames())
	case 1:
		return raw, from, nil
	default:
		return "", "", fmt.Errorf("%w: %s are all set: pass --store URL or set REQLOCK_STORE to say which store to use",
			errBadStore, strings.Join(set, " and "))
	}
}

// parseStore parses a store address (a URL, or "mysql-dsn:" and a
// go-sql-driver/mysql DSN from MYSQL_DSN) with the options opt, which win
// over the URL's query parameters of the same meaning when set. timeout
// bounds connecting and each call.
func parseStore(raw string, opt storeOptions, timeout time.Duration) (*storeSpec, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", errBadStore, redact(raw), fmt.Sprintf(format, args...))
	}
	if dsn, ok := strings.CutPrefix(raw, "mysql-dsn:"); ok {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("%w: MYSQL_DSN: %w", errBadStore, err)
		}
		return mysqlSpec(cfg, url.Values{}, opt, timeout, bad)
	}
	name, _, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, bad("not a URL (scheme://host:port); want one of %s", schemeNames())
	}
	i := slices.IndexFunc(schemes, func(s scheme) bool { return s.name == strings.ToLower(name) })
	if i < 0 {
		return nil, bad("unknown scheme %q; want one of %s", name, schemeNames())
	}
	sch := schemes[i]
	// url.Parse takes one host: the list of hosts is cut out before, and
	// put back after.
	rest := raw[len(name)+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	hostList := rest[at+1 : end]
	u, err := url.Parse(name + "://" + rest[:at+1] + "host" + rest[end:])
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, bad("%v", err)
	}
	u.Host = hostList
	if u.Host == "" {
		return nil, bad("no host (want %s)", sch.example)
	}
	hosts, err := splitHosts(u.Host, sch.port)
	if err != nil {
		return nil, bad("%v", err)
	}
	q := u.Query()
	s := &storeSpec{kind: sch.kind, where: redact(raw), hosts: hosts}
	take := func(key string) string {
		v := q.Get(key)
		q.Del(key)
		return v
	}
	s.prefix = pick(opt, "prefix", opt.Prefix, take("prefix"), core.DefaultPrefix)
	if strings.ContainsAny(s.prefix, "{}") {
		return nil, bad("the prefix %q must not contain '{' or '}'", s.prefix)
	}
	pass, _ := u.User.Password()
	user := u.User.Username()
	switch sch.kind {
	case kindRedis:
		if len(hosts) > 1 {
			return nil, bad("one host for redis:// (a cluster is redis-cluster://, a Sentinel deployment redis-sentinel://)")
		}
		v := *u
		v.RawQuery = q.Encode()
		o, err := redis.ParseURL(v.String())
		if err != nil {
			return nil, bad("%v", err)
		}
		redisTimeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, timeout)
		o.ContextTimeoutEnabled = true
		s.redis = o
	case kindRedlock:
		// One go-redis client per master, all with the URL's options.
		for _, h := range hosts {
			v := *u
			v.Scheme, v.Host, v.RawQuery = "redis", h, q.Encode()
			o, err := redis.ParseURL(v.String())
			if err != nil {
				return nil, bad("%v", err)
			}
			redisTimeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, timeout)
			o.ContextTimeoutEnabled = true
			s.redlock = append(s.redlock, o)
		}
	case kindSentinel:
		master := strings.Trim(u.Path, "/")
		if master == "" || strings.Contains(master, "/") {
			return nil, bad("the master's name is missing: want %s", sch.example)
		}
		// go-redis parses the sentinels from a redis:// URL: the first host,
		// the others as addr parameters. The URL's user and password are
		// the data nodes' (the master's); sentinel_password is the
		// sentinels' own, if they ask for one.
		sentinelPass := take("sentinel_password")
		v := url.URL{Scheme: "redis", Host: hosts[0]}
		if sch.tls {
			v.Scheme = "rediss"
		}
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		q.Set("master_name", master)
		v.RawQuery = q.Encode()
		o, err := redis.ParseFailoverURL(v.String())
		if err != nil {
			return nil, bad("%v", err)
		}
		o.Username, o.Password, o.SentinelPassword = user, pass, sentinelPass
		redisTimeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, timeout)
		o.ContextTimeoutEnabled = true
		s.failover = o
	case kindCluster:
		if strings.Trim(u.Path, "/") != "" {
			return nil, bad("a cluster has no database number or path (want %s)", sch.example)
		}
		v := url.URL{Scheme: "redis", User: u.User, Host: hosts[0]}
		if sch.tls {
			v.Scheme = "rediss"
		}
		for _, h := range hosts[1:] {
			q.Add("addr", h)
		}
		v.RawQuery = q.Encode()
		o, err := redis.ParseClusterURL(v.String())
		if err != nil {
			return nil, bad("%v", err)
		}
		redisTimeouts(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, timeout)
		o.ContextTimeoutEnabled = true
		s.cluster = o
	case kindEtcd:
		if strings.Trim(u.Path, "/") != "" {
			return nil, bad("etcd takes no path; its key prefix is the etcd_prefix parameter or --etcd-prefix (want %s)", sch.example)
		}
		s.etcdPfx = pick(opt, "etcd-prefix", opt.EtcdPrefix, take("etcd_prefix"), etcdstore.DefaultPrefix)
		if err := unknownParams(q, "prefix, etcd_prefix"); err != nil {
			return nil, bad("%v", err)
		}
		s.etcd = clientv3.Config{Endpoints: hosts, Username: user, Password: pass, DialTimeout: timeout, Logger: zap.NewNop()}
		if sch.tls {
			s.etcd.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	case kindZooKeeper:
		if u.User != nil {
			return nil, bad("ZooKeeper's URL takes no user or password")
		}
		root := take("root")
		if p := strings.TrimRight(u.Path, "/"); p != "" {
			if root != "" && root != p {
				return nil, bad("two roots: the path %q and root=%q", p, root)
			}
			root = p
		}
		s.root = pick(opt, "root", opt.Root, root, zkstore.DefaultRoot)
		if err := unknownParams(q, "prefix, root"); err != nil {
			return nil, bad("%v", err)
		}
	case kindPostgres:
		// pgx parses the URL itself, several hosts included.
		s.table = pick(opt, "table", opt.Table, take("table"), sqlstore.DefaultTable)
		if q.Get("connect_timeout") == "" {
			q.Set("connect_timeout", strconv.Itoa(max(1, int(timeout.Seconds()))))
		}
		v := *u
		v.RawQuery = q.Encode()
		s.dsn, s.driver = v.String(), "pgx"
	case kindMySQL:
		if len(hosts) > 1 {
			return nil, bad("one host for mysql://")
		}
		db := strings.Trim(u.Path, "/")
		if db == "" || strings.Contains(db, "/") {
			return nil, bad("the database is missing: want %s", sch.example)
		}
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, pass, "tcp", hosts[0], db
		return mysqlSpec(cfg, q, opt, timeout, bad, s)
	case kindMemcached:
		if u.User != nil || strings.Trim(u.Path, "/") != "" {
			return nil, bad("memcached's URL is host:port[,host:port...] only")
		}
		if err := unknownParams(q, "prefix"); err != nil {
			return nil, bad("%v", err)
		}
	}
	return s, nil
}

// mysqlSpec finishes the spec of a MySQL or MariaDB store from the
// driver's configuration cfg and the URL's remaining parameters q (the
// driver's own: tls, charset, ...). base is the spec begun from a URL, or
// none for MYSQL_DSN.
func mysqlSpec(cfg *mysql.Config, q url.Values, opt storeOptions, timeout time.Duration, bad func(string, ...any) error, base ...*storeSpec) (*storeSpec, error) {
	s := &storeSpec{kind: kindMySQL, where: "mysql " + cfg.User + "@" + cfg.Addr + "/" + cfg.DBName, hosts: []string{cfg.Addr}}
	if len(base) > 0 {
		s = base[0]
	} else {
		s.prefix = pick(opt, "prefix", opt.Prefix, "", core.DefaultPrefix)
		if strings.ContainsAny(s.prefix, "{}") {
			return nil, bad("the prefix %q must not contain '{' or '}'", s.prefix)
		}
	}
	s.table = pick(opt, "table", opt.Table, q.Get("table"), sqlstore.DefaultTable)
	q.Del("table")
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k := range q {
		switch k {
		case "tls":
			cfg.TLSConfig = q.Get(k)
		default:
			cfg.Params[k] = q.Get(k)
		}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = timeout
	}
	cfg.ParseTime = true
	// Check the configuration the way the driver will read it.
	dsn := cfg.FormatDSN()
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return nil, bad("%v", err)
	}
	s.dsn, s.driver = dsn, "mysql"
	return s, nil
}

// pick returns the flag's value when the flag was given, else the URL's
// when it has one, else def.
func pick(opt storeOptions, flag, flagValue, urlValue, def string) string {
	if opt.set[flag] {
		return flagValue
	}
	if urlValue != "" {
		return urlValue
	}
	return def
}

// unknownParams reports the query parameters left in q, which the store
// does not know.
func unknownParams(q url.Values, known string) error {
	if len(q) == 0 {
		return nil
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return fmt.Errorf("unknown parameter %s (known: %s)", strings.Join(keys, ", "), known)
}

// redisTimeouts sets go-redis's timeouts that the URL left at their
// defaults to the command's timeout.
func redisTimeouts(dial, read, write *time.Duration, timeout time.Duration) {
	for _, d := range []*time.Duration{dial, read, write} {
		if *d == 0 {
			*d = timeout
		}
	}
}

// splitHosts splits a URL's host part "h:p,h:p" into host:port pairs, with
// port def where one is missing.
func splitHosts(hostport, def string) ([]string, error) {
	var hosts []string
	for _, h := range strings.Split(hostport, ",") {
		if h == "" {
			return nil, errors.New("an empty host in the list")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// No port: the whole is the host (an IPv6 address in brackets).
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), def
			if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
				return nil, fmt.Errorf("bad host %q", h)
			}
		}
		if host == "" {
			return nil, fmt.Errorf("no host name in %q", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("bad port in %q", h)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}
	return hosts, nil
}

// redact returns raw with the password of a URL replaced by "xxxxx", for
// messages and the audit log.
func redact(raw string) string {
	if dsn, ok := strings.CutPrefix(raw, "mysql-dsn:"); ok {
		if cfg, err := mysql.ParseDSN(dsn); err == nil && cfg.Passwd != "" {
			cfg.Passwd = "xxxxx"
			return "MYSQL_DSN " + cfg.FormatDSN()
		}
		return "MYSQL_DSN"
	}
	if name, rest, ok := strings.Cut(raw, "://"); ok {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			if user, _, ok := strings.Cut(rest[:at], ":"); ok {
				raw = name + "://" + user + ":xxxxx" + rest[at:]
			}
		}
	}
	return passwordParam.ReplaceAllString(raw, "${1}xxxxx")
}

// passwordParam matches a password in a URL's query (password=,
// sentinel_password=).
var passwordParam = regexp.MustCompile(`((?:^|[?&])[a-z_]*password=)[^&#]*`)

// conn is an open store and the Locker the command inspects it through.
type conn struct {
	locker  *core.Locker
	store   core.Store
	where   string
	prefix  string        // core's prefix (--prefix)
	timeout time.Duration // bounds each call (--timeout)
	closers []func()
}

// bound returns ctx bounded by the conn's timeout, for one call of the
// Locker: List and Inspect are bounded by their context only.
func (c *conn) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// Close closes what open opened, last first.
func (c *conn) Close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// open connects to the store s names and checks, within timeout, that it
// answers. The error names the store.
func open(ctx context.Context, s *storeSpec, timeout time.Duration) (_ *conn, err error) {
	c := &conn{where: string(s.kind) + " at " + strings.Join(s.hosts, ","), prefix: s.prefix, timeout: timeout}
	if s.kind == kindMySQL || s.kind == kindPostgres {
		c.where = s.where
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	fail := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("reqlock: %s: no answer within %v: %w", c.where, timeout, err)
		}
		return fmt.Errorf("reqlock: %s: %w", c.where, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch s.kind {
	case kindRedis, kindSentinel, kindCluster:
		var client redis.UniversalClient
		switch {
		case s.redis != nil:
			client = redis.NewClient(s.redis)
		case s.failover != nil:
			client = redis.NewFailoverClient(s.failover)
			c.where = "redis-sentinel " + s.failover.MasterName + " at " + strings.Join(s.hosts, ",")
		default:
			client = redis.NewClusterClient(s.cluster)
		}
		c.closers = append(c.closers, func() { _ = client.Close() })
		if err := client.Ping(ctx).Err(); err != nil {
			return nil, fail(err)
		}
		c.store = core.NewRedisStore(client)
		c.closers = append(c.closers, closeStore(c.store))
	case kindRedlock:
		// Redlock's stores, one per master: the Inspector lists what a
		// quorum of them holds.
		stores := make([]core.Store, len(s.redlock))
		for i, o := range s.redlock {
			client := redis.NewClient(o)
			c.closers = append(c.closers, func() { _ = client.Close() })
			if err := client.Ping(ctx).Err(); err != nil {
				return nil, fmt.Errorf("reqlock: %s: master %s: %w", c.where, o.Addr, err)
			}
			stores[i] = core.NewRedisStore(client)
		}
		c.store = core.NewRedlockStore(stores...)
		c.closers = append(c.closers, closeStore(c.store)) // closes the masters' stores
	case kindEtcd:
		client, err := clientv3.New(s.etcd)
		if err != nil {
			return nil, fail(err)
		}
		c.closers = append(c.closers, func() { _ = client.Close() })
		if _, err := client.Get(ctx, s.etcdPfx); err != nil {
			return nil, fail(err)
		}
		st, err := etcdstore.New(client, etcdstore.WithPrefix(s.etcdPfx))
		if err != nil {
			return nil, fail(err)
		}
		c.store = st
		c.closers = append(c.closers, closeStore(st))
	case kindZooKeeper:
		zc, events, err := zk.Connect(s.hosts, max(timeout, 4*time.Second), zk.WithLogger(log.New(io.Discard, "", 0)),
			zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
		if err != nil {
			return nil, fail(err)
		}
		c.closers = append(c.closers, zc.Close)
		if err := waitSession(ctx, events); err != nil {
			return nil, fail(err)
		}
		st, err := zkstore.New(zc, zkstore.WithRoot(s.root))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errBadStore, err)
		}
		c.store = st
		c.closers = append(c.closers, closeStore(st))
	case kindPostgres, kindMySQL:
		db, err := sql.Open(s.driver, s.dsn)
		if err != nil {
			return nil, fail(err)
		}
		db.SetMaxOpenConns(4)
		c.closers = append(c.closers, func() { _ = db.Close() })
		if err := db.PingContext(ctx); err != nil {
			return nil, fail(err)
		}
		st, err := sqlstore.New(db, sqlstore.WithTable(s.table))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errBadStore, err)
		}
		c.store = st
		c.where += " (table " + s.table + ")"
		c.closers = append(c.closers, closeStore(st))
	case kindMemcached:
		client := memcache.New(s.hosts...)
		client.Timeout = timeout
		c.closers = append(c.closers, func() { _ = client.Close() })
		if err := pingMemcached(ctx, client); err != nil {
			return nil, fail(err)
		}
		// The Inspector asks each server itself (lru_crawler metadump,
		// meta get), in memcache.New's order.
		st, err := memcachedstore.New(client, memcachedstore.WithServers(s.hosts...))
		if err != nil {
			return nil, fail(err)
		}
		c.store = st
		c.closers = append(c.closers, closeStore(st))
	default:
		return nil, fmt.Errorf("%w: no store of kind %q", errBadStore, s.kind)
	}
	c.locker = core.NewWithStore(c.store, core.WithPrefix(s.prefix), core.WithIOTimeout(timeout))
	if err := c.locker.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadStore, err)
	}
	return c, nil
}

// pingMemcached pings every server of client, within ctx: gomemcache's Ping
// takes no context, so it runs beside a wait on ctx (its own timeout, the
// command's, ends it soon after).
func pingMemcached(ctx context.Context, client *memcache.Client) error {
	done := make(chan error, 1)
	go func() { done <- client.Ping() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		<-done
		return ctx.Err()
	}
}

// waitSession waits until a ZooKeeper connection has a session.
func waitSession(ctx context.Context, events <-chan zk.Event) error {
	for {
		select {
		case e := <-events:
			if e.State == zk.StateHasSession {
				return nil
			}
			if e.State == zk.StateAuthFailed {
				return errors.New("authentication failed")
			}
		case <-ctx.Done():
			return fmt.Errorf("no session: %w", ctx.Err())
		}
	}
}

// closeStore returns a func that closes s if it has a Close method.
func closeStore(s core.Store) func() {
	return func() {
		if c, ok := s.(io.Closer); ok {
			_ = c.Close()
		}
	}
}
