package stores

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/reqlock/reqlock/internal/faulthistory/history"
	"github.com/reqlock/reqlock/internal/servers"
	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// TestFaultHistory runs the fault-history test of internal/faulthistory on
// every store but Redis through go-redis: with REQLOCK_FAULTHISTORY=1, each
// store once with the watchdog and fencing; with REQLOCK_FAULTHISTORY=long,
// each without them too, with a cut link besides the black-holed one, and
// on a 3-member etcd cluster and a 3-server ZooKeeper ensemble whose leader
// is killed. It logs the figures by store and fault (history.Summary) and
// asserts the hard ones: no unexplained overlap, no stale write accepted
// with fencing, no write after Done.
func TestFaultHistory(t *testing.T) {
	variants := []history.Variant{history.WatchdogFencing}
	if history.Long() {
		variants = []history.Variant{history.Plain, history.WatchdogFencing}
	}
	type target struct {
		store string
		start func(t *testing.T) *history.Target
	}
	targets := []target{
		{"etcd", etcdTarget},
		{"ZooKeeper", zooKeeperTarget},
		{"PostgreSQL", postgresTarget},
		{"MariaDB", mariadbTarget},
		{"memcached", memcachedTarget},
		{"Redis (rueidis)", rueidisTarget},
	}
	if history.Long() {
		targets = append(targets, target{"etcd, 3 members", etcdClusterTarget}, target{"ZooKeeper, 3 servers", zooKeeperEnsembleTarget})
	}
	var cases []history.Case
	for _, tg := range targets {
		for _, v := range variants {
			cases = append(cases, history.Case{Store: tg.store, Variant: v, Start: tg.start})
		}
	}
	history.Suite(t, cases)
}

// TestWorkerProcess is one worker of TestFaultHistory, run in a process of
// its own; it is skipped unless that test started it.
func TestWorkerProcess(t *testing.T) {
	_ = mysql.SetLogger(quietMySQL{})
	history.WorkerMain(t, openStore)
}

// serverSteps are the faults of a store of one server process p: a holder
// frozen, the server frozen, a holder's link black-holed (and cut, in the
// long run), the server killed and restarted (on its data, unless reset).
func serverSteps(p *servers.Process, reset bool) []history.Step {
	steps := []history.Step{
		history.FreezeHolder(),
		history.FreezeStore(p.Freeze, p.Thaw),
		history.BreakLink(false),
	}
	if history.Long() {
		steps = append(steps, history.BreakLink(true))
	}
	return append(steps, history.RestartStore(reset, p.Stop, p.Relaunch))
}

// clusterSteps are the faults of a cluster: a holder frozen, every member
// frozen, a holder's links black-holed and cut, the leader killed (and
// restarted a TTL later), every member killed and restarted on its data.
// ready waits until the cluster serves again.
func clusterSteps(members []*servers.Process, leader func() (*servers.Process, error), ready func() error) []history.Step {
	each := func(f func(p *servers.Process) error) error {
		errs := make([]error, len(members))
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Go(func() { errs[i] = f(m) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	return []history.Step{
		history.FreezeHolder(),
		history.FreezeStore(
			func() error { return each(func(p *servers.Process) error { return p.Freeze() }) },
			func() error { return each(func(p *servers.Process) error { return p.Thaw() }) }),
		history.BreakLink(false),
		history.BreakLink(true),
		history.KillLeader(func() (func(), func() error, func() error, error) {
			l, err := leader()
			if err != nil {
				return nil, nil, nil, err
			}
			elected := func() error {
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
					next, err := leader()
					if err == nil && next != l {
						return nil
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("no new leader a minute after the leader was killed: %v", err)
					}
				}
			}
			return l.Stop, elected, func() error { return errors.Join(l.Relaunch(), ready()) }, nil
		}),
		history.RestartStore(false,
			func() { _ = each(func(p *servers.Process) error { p.Stop(); return nil }) },
			func() error {
				return errors.Join(each(func(p *servers.Process) error { return p.Relaunch() }), ready())
			}),
	}
}

// etcdTarget is a one-member etcd cluster.
func etcdTarget(t *testing.T) *history.Target {
	p := servers.StartEtcd(t)
	return &history.Target{
		Addrs:  []string{p.Addr()},
		URL:    func(addrs []string) string { return "etcd://" + addrs[0] },
		Faults: serverSteps(p, false),
	}
}

// etcdClusterTarget is a 3-member etcd cluster (heartbeat 50 ms, election
// timeout 500 ms: a loaded machine does not trigger elections by itself).
func etcdClusterTarget(t *testing.T) *history.Target {
	c := servers.StartEtcdCluster(t, 3, 50*time.Millisecond, 500*time.Millisecond)
	return &history.Target{
		Addrs:  c.Addrs(),
		URL:    func(addrs []string) string { return "etcd://" + strings.Join(addrs, ",") },
		Faults: clusterSteps(c.Members, c.Leader, func() error { return nil }), // a member is ready once the cluster has a leader
	}
}

// zooKeeperTarget is a standalone ZooKeeper server.
func zooKeeperTarget(t *testing.T) *history.Target {
	p := servers.StartZooKeeper(t)
	return &history.Target{
		Addrs:  []string{p.Addr()},
		URL:    func(addrs []string) string { return "zookeeper://" + addrs[0] },
		Faults: serverSteps(p, false),
	}
}

// zooKeeperEnsembleTarget is an ensemble of 3 ZooKeeper servers.
func zooKeeperEnsembleTarget(t *testing.T) *history.Target {
	e := servers.StartZooKeeperEnsemble(t, 3)
	return &history.Target{
		Addrs:  e.Addrs(),
		URL:    func(addrs []string) string { return "zookeeper://" + strings.Join(addrs, ",") },
		Faults: clusterSteps(e.Servers, e.Leader, func() error { return e.WaitLeader(60 * time.Second) }),
	}
}

// postgresTarget is a PostgreSQL server with the lock table.
func postgresTarget(t *testing.T) *history.Target {
	p := servers.StartPostgres(t)
	createTable(t, "pgx", servers.PostgresURL(p.Addr()))
	return &history.Target{
		Addrs:  []string{p.Addr()},
		URL:    func(addrs []string) string { return servers.PostgresURL(addrs[0]) },
		Faults: serverSteps(p, false),
	}
}

// mariadbTarget is a MariaDB server with the database reqlock and the lock
// table.
func mariadbTarget(t *testing.T) *history.Target {
	_ = mysql.SetLogger(quietMySQL{})
	p := servers.StartMariaDB(t)
	db, err := sql.Open("mysql", servers.MariaDBUser+"@tcp("+p.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(context.Background(), "CREATE DATABASE IF NOT EXISTS reqlock")
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	createTable(t, "mysql", servers.MariaDBUser+"@tcp("+p.Addr()+")/reqlock")
	return &history.Target{
		Addrs:  []string{p.Addr()},
		URL:    func(addrs []string) string { return "mysql://" + servers.MariaDBUser + "@" + addrs[0] + "/reqlock" },
		Faults: serverSteps(p, false),
	}
}

// createTable creates sqlstore's lock table in the database of dsn.
func createTable(t *testing.T, driver, dsn string) {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := sqlstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
}

// memcachedTarget is a memcached server. It keeps nothing on disk: its
// restart loses every lock, as the fault model says. It holds a lock up to
// 3 s longer than its TTL (memcachedstore rounds TTLs up to whole seconds
// and adds 2 s), so the stalls last past that.
func memcachedTarget(t *testing.T) *history.Target {
	p := servers.StartMemcached(t, "-m", "64")
	return &history.Target{
		Addrs:  []string{p.Addr()},
		URL:    func(addrs []string) string { return "memcached://" + addrs[0] },
		Hold:   history.TTL + 3*time.Second,
		Faults: serverSteps(p, true),
	}
}

// rueidisTarget is a redis-server without persistence, reached through
// rueidis, with the faults of the Redis run of the root module (Redis
// restarted empty, FLUSHALL), the lock's key sampled for orphans.
func rueidisTarget(t *testing.T) *history.Target {
	return history.RedisTarget(t, "rueidis")
}
