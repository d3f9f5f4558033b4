// Command reqlock lets an operator see and steer the locks that services
// keep with github.com/reqlock/reqlock, in any of its stores:
//
//	reqlock ls [prefix]            the names held now under a name prefix (paged; --long inspects each)
//	reqlock show NAME              its holders (host, pid, route, request id, since, mode, permits/slot,
//	                               read from each token by core.ParseHolder), TTL left, fence,
//	                               the writer waiting for shares, the fair queue's waiters in order
//	reqlock watch [prefix]         a live view, redrawn every --interval (--count N frames)
//	reqlock release --force NAME   the break-glass: shows the holder, asks, releases only that token
//	                               (core's Locker.ForceRelease, a compare-and-delete) and records
//	                               who did it in an audit log
//
// It reaches a store by URL (--store, or $REQLOCK_STORE, or the variables
// of the orders example: REDIS_ADDR, ETCD_ENDPOINTS, ZOOKEEPER_SERVERS,
// DATABASE_URL, MYSQL_DSN, MEMCACHED_SERVERS): redis://, rediss://,
// redis-sentinel://, redis-cluster://, redlock://, etcd://, zk://, postgres://,
// mysql://, memcached://. The settings that name the locks must match the
// service's: --prefix (core.WithPrefix), --table (sqlstore.WithTable),
// --root (zkstore.WithRoot), --etcd-prefix (etcdstore.WithPrefix).
//
// Everything but release only reads, through the stores' optional
// lockstore.Inspector (Redis lists with SCAN, never KEYS). Output is text
// for people, --json for scripts (one document per command, one line per
// frame of watch). Exit status: 0 done, 1 failed, 2 bad command line.
//
// The command line is parsed by github.com/spf13/cobra.
package main
