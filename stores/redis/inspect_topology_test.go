package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/internal/redistest"
	"github.com/reqlock/reqlock/lockstore"
	redisstore "github.com/reqlock/reqlock/stores/redis"
)

// On a Cluster of three masters List walks every master: keys of many
// hash tags, spread over the three, come in pages of every size, each
// once; Inspect reads a lock with its shares and queue in one slot.
func TestListClusterEveryMaster(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	cluster := redistest.StartCluster(t, 3, 0)
	s := redisstore.New(cluster.Client(t))
	defer s.Close()
	prefix := "cl:" + uniq(t) + ":"
	var want []string
	masters := make(map[string]int)
	for i := range 30 {
		k := lockKey(prefix, fmt.Sprint(i))
		if ok, _, err := s.TryAcquire(ctx, k, "t", inspectTTL, i%3 == 0); !ok || err != nil {
			t.Fatal(k, ok, err)
		}
		m, err := cluster.MasterOf(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()]++
		want = append(want, k)
	}
	if len(masters) != 3 {
		t.Fatalf("the keys live on %d masters, want 3: %v", len(masters), masters)
	}
	for _, limit := range []int{1, 4, 7, lockstore.MaxListLimit} {
		sameSet(t, fmt.Sprintf("limit %d", limit), listAll(t, s, prefix, limit), want)
	}

	pk := lockKey(prefix, "permits")
	share(t, s, pk, "a", permits2, true, true)
	if ok, _, err := s.TryAcquireWaiting(ctx, pk, "w", inspectTTL, inspectTTL, true); ok || err != nil {
		t.Fatal(ok, err)
	}
	st, err := s.Inspect(ctx, pk)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "a" || st.Holders[0].Hold != permits2 || st.Writer != "w" || st.Fence == 0 {
		t.Fatalf("Inspect on the cluster = %+v, %v", st, err)
	}
}

// On a Sentinel-managed master List and Inspect see the master's locks.
func TestInspectSentinel(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	d := redistest.StartSentinel(t)
	s := redisstore.New(d.Client(t))
	defer s.Close()
	k := lockKey("sent:", "a")
	if ok, _, err := s.TryAcquire(ctx, k, "tok", inspectTTL, false); !ok || err != nil {
		t.Fatal(ok, err)
	}
	sameSet(t, "sentinel", listAll(t, s, "sent:", 10), []string{k})
	st, err := s.Inspect(ctx, k)
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "tok" {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
}

// On a Ring List walks every shard.
func TestListRingEveryShard(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	nodes := redistest.StartNodes(t, 2)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"a": nodes[0].Addr(), "b": nodes[1].Addr()},
		ContextTimeoutEnabled: true,
	})
	defer ring.Close()
	s := redisstore.New(ring)
	defer s.Close()
	var want []string
	for i := range 20 {
		k := lockKey("ring:", fmt.Sprint(i))
		if ok, _, err := s.TryAcquire(ctx, k, "t", inspectTTL, false); !ok || err != nil {
			t.Fatal(k, ok, err)
		}
		want = append(want, k)
	}
	for _, n := range nodes {
		if size, err := n.Client(t).DBSize(ctx).Result(); size == 0 || err != nil {
			t.Fatalf("shard %s holds %d keys (%v); want some", n.Addr(), size, err)
		}
	}
	sameSet(t, "ring", listAll(t, s, "ring:", 3), want)
	st, err := s.Inspect(ctx, want[0])
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
}

// setOn sets key to token on a Redlock node for ttl.
func setOn(t *testing.T, c redis.UniversalClient, key, token string, ttl time.Duration) {
	t.Helper()
	if err := c.Set(context.Background(), key, token, ttl).Err(); err != nil {
		t.Fatal(err)
	}
}

// Redlock's Inspect reports the holders a quorum of nodes hold, with the
// smallest TTL among them, and the highest fence of the nodes; a token a
// minority holds is no holder. List is the union of the nodes' listings,
// each key once; with a node down both go on, with two of three down both
// fail with a storage error.
func TestRedlockInspectQuorumView(t *testing.T) {
	leakCheck(t)
	ctx := context.Background()
	nodes := redistest.StartNodes(t, 3)
	clients := nodes.Clients(t)
	r := redisstore.NewRedlock(clients)
	defer r.Close()

	quorum, minority := lockKey("rl:", "quorum"), lockKey("rl:", "minority")
	setOn(t, clients[0], quorum, "A", time.Minute)
	setOn(t, clients[1], quorum, "A", 30*time.Second)
	setOn(t, clients[2], quorum, "B", time.Minute)
	setOn(t, clients[1], quorum+":fence", "99", time.Minute)
	setOn(t, clients[0], quorum+":fence", "7", time.Minute)
	setOn(t, clients[2], minority, "C", time.Minute)

	st, err := r.Inspect(ctx, quorum)
	if err != nil || len(st.Holders) != 1 || st.Fence != 99 {
		t.Fatalf("Inspect(quorum) = %+v, %v", st, err)
	}
	if h := st.Holders[0]; h.Token != "A" || !h.Exclusive {
		t.Fatalf("holder = %+v, want A", h)
	}
	checkTTL(t, "quorum holder", st.Holders[0].TTL, 30*time.Second)
	if st, err := r.Inspect(ctx, minority); err != nil || st.Held() {
		t.Fatalf("Inspect(minority) = %+v, %v; want no holder", st, err)
	}
	// a lock taken through Redlock itself
	taken := lockKey("rl:", "taken")
	if ok, fence, err := r.TryAcquire(ctx, taken, "T", inspectTTL, true); !ok || err != nil {
		t.Fatal(ok, err)
	} else if st, err := r.Inspect(ctx, taken); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "T" || st.Fence != fence {
		t.Fatalf("Inspect(taken) = %+v, %v; want T with fence %d", st, err, fence)
	}

	want := []string{quorum, minority, taken}
	for _, limit := range []int{1, 2, 10} {
		sameSet(t, fmt.Sprintf("redlock limit %d", limit), listAll(t, r, "rl:", limit), want)
	}
	if _, _, err := r.List(ctx, "rl:", "nonsense", 10); !errors.Is(err, lockstore.ErrInvalidOption) {
		t.Fatalf("List with a foreign cursor = %v; want ErrInvalidOption", err)
	}

	nodes[2].Stop()
	if st, err := r.Inspect(ctx, quorum); err != nil || len(st.Holders) != 1 || st.Holders[0].Token != "A" {
		t.Fatalf("Inspect with a node down = %+v, %v", st, err)
	}
	sameSet(t, "redlock with a node down", listAll(t, r, "rl:", 10), []string{quorum, taken})

	nodes[1].Stop()
	if _, err := r.Inspect(ctx, quorum); err == nil {
		t.Fatal("Inspect with two nodes of three down: no error")
	}
	var err2 error
	for cursor, pages := "", 0; pages < 10; pages++ {
		if _, cursor, err2 = r.List(ctx, "rl:", cursor, 10); err2 != nil || cursor == "" {
			break
		}
	}
	if err2 == nil {
		t.Fatal("List with two nodes of three down: no error")
	}
}
