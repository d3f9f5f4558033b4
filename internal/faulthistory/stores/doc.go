// Package stores runs the fault-history test of internal/faulthistory on
// every store other than Redis through go-redis (which the root module's
// test covers, with the fair queue): etcd, ZooKeeper, PostgreSQL and
// MariaDB (stores/sql), memcached and Redis through rueidis, each on real
// servers started on loopback. It is a module of its own so that the
// root module does not depend on the stores' clients; the history, the
// workers, the faults and the analysis are shared
// (internal/faulthistory/history).
//
// The package has no code outside its tests. The test runs only when
// REQLOCK_FAULTHISTORY=1 (one variant, watchdog and fencing, per store) or
// long (also without them, a cut link, and a 3-member etcd cluster and a
// 3-server ZooKeeper ensemble whose leader is killed);
// ./scripts/test.sh runs it on its own, after the modules' tests:
//
//	cd internal/faulthistory/stores
//	REQLOCK_FAULTHISTORY=1 go test -race -count=1 -v -run '^TestFaultHistory$' .
//
// Workers open their store from a URL (see open_test.go): rueidis://,
// etcd://, zookeeper://, postgres://, mysql://, memcached://.
package stores
