package core_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/internal/redistest"
)

// plainStore hides every optional capability of the store it wraps.
type plainStore struct{ core.Store }

// fakeInspector is a Redis store with a naive Inspector of exclusive locks
// (KEYS, GET, PTTL): enough for the Locker's part of inspection, which is
// what these tests check. The stores' own Inspectors pass core/storetest.
type fakeInspector struct {
	core.Store
	rdb   *redis.Client
	calls []string // the key prefixes List was asked for
}

func (f *fakeInspector) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	f.calls = append(f.calls, prefix)
	keys, err := f.rdb.Keys(ctx, "*").Result()
	if err != nil {
		return nil, "", err
	}
	var held []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, "}") {
			held = append(held, k)
		}
	}
	sort.Strings(held)
	i := 0
	if cursor != "" {
		i = sort.SearchStrings(held, cursor) + 1
	}
	if i+limit >= len(held) {
		return held[min(i, len(held)):], "", nil
	}
	return held[i : i+limit], held[i+limit-1], nil
}

func (f *fakeInspector) Inspect(ctx context.Context, key string) (core.KeyState, error) {
	tok, err := f.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return core.KeyState{Key: key}, nil
	}
	if err != nil {
		return core.KeyState{}, err
	}
	ttl, err := f.rdb.PTTL(ctx, key).Result()
	if err != nil {
		return core.KeyState{}, err
	}
	return core.KeyState{Key: key, Holders: []core.HolderState{{Token: tok, Exclusive: true, TTL: ttl}}}, nil
}

func TestLockerInspect(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	fi := &fakeInspector{Store: core.NewRedisStore(rdb), rdb: rdb}
	l := core.NewWithStore(fi, core.WithPrefix("app:"), core.WithTTL(30*time.Second))
	ctx := context.Background()
	var leases []*core.Lease
	for _, n := range []string{"order:1", "order:2", "order:3", "user:1"} {
		lease, err := l.Acquire(ctx, n, core.Route("/orders/:id"), core.RequestID("r-"+n))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}

	// List maps a name prefix to a key prefix and keys back to names.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		names, next, err := l.List(ctx, "order:", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, names...)
		if cursor = next; next == "" {
			break
		}
		if pages > 10 {
			t.Fatal("List does not end")
		}
	}
	if want := []string{"order:1", "order:2", "order:3"}; !slices.Equal(got, want) {
		t.Errorf("List(order:) = %v, want %v", got, want)
	}
	if fi.calls[0] != "app:{order:" {
		t.Errorf("the store was asked for the key prefix %q, want app:{order:", fi.calls[0])
	}
	for _, limit := range []int{0, -1, core.MaxListLimit + 1} {
		if _, _, err := l.List(ctx, "", "", limit); !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("List(limit %d) = %v, want ErrInvalidOption", limit, err)
		}
	}
	if _, _, err := l.List(ctx, "a{b", "", 10); !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("List(a{b) = %v, want ErrInvalidName", err)
	}

	// Inspect reads who holds it from the token.
	st, err := l.Inspect(ctx, "order:2")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held() || len(st.Holders) != 1 || st.Holders[0].Token != leases[1].Token() || !st.Holders[0].Identified {
		t.Fatalf("Inspect(order:2) = %+v, want the lease's token, identified", st)
	}
	if h := st.Holders[0].Holder; h.RequestID != "r-order:2" || h.Route != "/orders/:id" || st.Key != "app:{order:2}" {
		t.Errorf("holder %v key %q", h, st.Key)
	}
	if st, err := l.Inspect(ctx, "order:9"); err != nil || st.Held() {
		t.Errorf("Inspect of a free name = %+v, %v; want no holder, no error", st, err)
	}

	// ForceRelease releases only the token it is given.
	if ok, err := l.ForceRelease(ctx, "order:2", leases[0].Token()); ok || err != nil {
		t.Errorf("ForceRelease with another lock's token = %v, %v; want false, nil", ok, err)
	}
	if ok, err := l.ForceRelease(ctx, "order:2", ""); ok || !errors.Is(err, core.ErrInvalidOption) {
		t.Errorf("ForceRelease with no token = %v, %v; want ErrInvalidOption", ok, err)
	}
	if st, _ := l.Inspect(ctx, "order:2"); !st.Held() {
		t.Fatal("order:2 was released by a refused ForceRelease")
	}
	if ok, err := l.ForceRelease(ctx, "order:2", leases[1].Token()); !ok || err != nil {
		t.Errorf("ForceRelease with the holder's token = %v, %v; want true", ok, err)
	}
	if st, _ := l.Inspect(ctx, "order:2"); st.Held() {
		t.Errorf("order:2 still held after ForceRelease: %+v", st)
	}
	if err := leases[1].Release(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Errorf("the forced-out lease's Release = %v, want ErrNotHeld", err)
	}
	if ok, err := l.ForceRelease(ctx, "order:2", leases[1].Token()); ok || err != nil {
		t.Errorf("a second ForceRelease = %v, %v; want false, nil", ok, err)
	}
	for _, lease := range leases {
		_ = lease.Release(ctx)
	}
}

func TestLockerWithoutInspector(t *testing.T) {
	srv := redistest.Start(t)
	l := core.NewWithStore(plainStore{core.NewRedisStore(srv.Client(t))})
	ctx := context.Background()
	if _, _, err := l.List(ctx, "", "", 10); !errors.Is(err, core.ErrNoInspector) {
		t.Errorf("List = %v, want ErrNoInspector", err)
	}
	if _, err := l.Inspect(ctx, "a"); !errors.Is(err, core.ErrNoInspector) {
		t.Errorf("Inspect = %v, want ErrNoInspector", err)
	}
	if _, err := l.ForceRelease(ctx, "a", "t"); !errors.Is(err, core.ErrNoInspector) {
		t.Errorf("ForceRelease = %v, want ErrNoInspector", err)
	}
}

func TestLockerInspectHashedName(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l := core.NewWithStore(&fakeInspector{Store: core.NewRedisStore(rdb), rdb: rdb})
	ctx := context.Background()
	long := strings.Repeat("n", core.MaxNameLen+1)
	lease, err := l.Acquire(ctx, long)
	if err != nil {
		t.Fatal(err)
	}
	names, _, err := l.List(ctx, "", "", 10)
	if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], "sha256:") {
		t.Fatalf("List = %v, %v; want the hashed name", names, err)
	}
	for _, n := range []string{long, names[0]} {
		if st, err := l.Inspect(ctx, n); err != nil || !st.Held() || st.Holders[0].Token != lease.Token() {
			t.Errorf("Inspect(%.20q…) = %+v, %v; want the lease", n, st, err)
		}
	}
	if ok, err := l.ForceRelease(ctx, names[0], lease.Token()); !ok || err != nil {
		t.Errorf("ForceRelease of the listed form = %v, %v", ok, err)
	}
}
