package scale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/servers"
	etcdstore "github.com/reqlock/reqlock/stores/etcd"
	zkstore "github.com/reqlock/reqlock/stores/zookeeper"
)

// ConsensusResult is the many-names run of reqlock on etcd or ZooKeeper,
// on Members servers.
type ConsensusResult struct {
	Store   string
	Members int
	Cycles  Cycles
}

// storeLock is reqlock on a core.Store.
type storeLock struct {
	l     *core.Locker
	close func()
}

func (s *storeLock) Acquire(ctx context.Context, name string) (func(context.Context) error, error) {
	lease, err := s.l.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

func (s *storeLock) Close() error {
	err := s.l.Close()
	s.close()
	return err
}

func openEtcd(addrs []string, shape Shape) (Lock, error) {
	c, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	s, err := etcdstore.New(c)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return newStoreLock(s, shape, func() { _ = s.Close(); _ = c.Close() })
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

func openZooKeeper(addrs []string, shape Shape) (Lock, error) {
	conn, _, err := zk.Connect(addrs, 10*time.Second, zk.WithLogger(zkQuiet{}), zk.WithLogInfo(false),
		zk.WithHostProvider(zkstore.NewHostProvider()), zk.WithDialer(zkstore.Dial))
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(10 * time.Second); conn.State() != zk.StateHasSession; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			conn.Close()
			return nil, fmt.Errorf("scale: no ZooKeeper session within 10s (state %v)", conn.State())
		}
	}
	s, err := zkstore.New(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return newStoreLock(s, shape, func() { _ = s.Close(); conn.Close() })
}

func newStoreLock(s core.Store, shape Shape, closeStore func()) (Lock, error) {
	l := core.NewWithStore(s, core.WithTTL(shape.TTL), core.WithWait(shape.Wait), core.WithSpin(shape.SpinMin, shape.SpinRandom))
	if err := l.Err(); err != nil {
		closeStore()
		return nil, err
	}
	return &storeLock{l: l, close: closeStore}, nil
}

// RunConsensus runs load with reqlock on etcd and on ZooKeeper, each on
// one server and on a cluster of members (3), which it starts and stops.
// Each Locker has a client of its own that knows every member.
func RunConsensus(ctx context.Context, load Load, shape Shape, members int) ([]ConsensusResult, error) {
	var out []ConsensusResult
	run := func(store string, n int, addrs []string, open func([]string, Shape) (Lock, error)) (err error) {
		var locks []Lock
		defer func() {
			for _, l := range locks {
				err = errors.Join(err, l.(*storeLock).Close())
			}
		}()
		for range load.Lockers {
			l, err := open(addrs, shape)
			if err != nil {
				return fmt.Errorf("scale: %s: %w", store, err)
			}
			locks = append(locks, l)
		}
		if err := warm(ctx, locks, load.Goroutines, "w:"); err != nil {
			return fmt.Errorf("scale: %s: %w", store, err)
		}
		out = append(out, ConsensusResult{Store: store, Members: n, Cycles: runLoad(ctx, locks, load, "n:", 0)})
		return nil
	}
	// The single servers are the stores section's (servers.EtcdSpec,
	// servers.ZooKeeperSpec); the clusters have the same settings but
	// ZooKeeper's tick (servers.ZooKeeperEnsembleTick).
	single := func(spec servers.Spec) ([]string, func(), error) {
		p, err := servers.Launch(spec)
		if err != nil {
			return nil, nil, err
		}
		return []string{p.Addr()}, p.Close, nil
	}
	type setup struct {
		store  string
		n      int
		launch func() ([]string, func(), error)
		open   func([]string, Shape) (Lock, error)
	}
	setups := []setup{
		{"etcd", 1, func() ([]string, func(), error) { return single(servers.EtcdSpec()) }, openEtcd},
		{"etcd", members, func() ([]string, func(), error) {
			c, err := servers.LaunchEtcdCluster(members, servers.EtcdHeartbeat, servers.EtcdElectionTimeout)
			if err != nil {
				return nil, nil, err
			}
			return c.Addrs(), c.Close, nil
		}, openEtcd},
		{"zookeeper", 1, func() ([]string, func(), error) { return single(servers.ZooKeeperSpec()) }, openZooKeeper},
		{"zookeeper", members, func() ([]string, func(), error) {
			e, err := servers.LaunchZooKeeperEnsemble(members)
			if err != nil {
				return nil, nil, err
			}
			return e.Addrs(), e.Close, nil
		}, openZooKeeper},
	}
	for _, s := range setups {
		addrs, stop, err := s.launch()
		if err != nil {
			return nil, err
		}
		err = run(s.store, s.n, addrs, s.open)
		stop()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
