package lockdebug_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlock/reqlock/core"
	"github.com/reqlock/reqlock/hotspot"
	"github.com/reqlock/reqlock/lockdebug"
)

// A service mounts the page on its admin mux, behind its admin
// authentication (or on a loopback-only admin port), never on the public
// one.
func Example_mount() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	guard := hotspot.New()
	page := lockdebug.New(lockdebug.WithGuard(guard))
	locker := core.New(client, core.WithHandlers(guard), core.WithObservers(page))
	_ = locker // ... the service's middleware locks with it

	admin := http.NewServeMux()
	admin.Handle("/debug/reqlock/", page) // the page; its JSON at /debug/reqlock/json
	_ = http.ListenAndServe("127.0.0.1:6060", admin)
}

// The JSON of a page fed events by hand (a Locker feeds it the same): one
// lease held for 1.5 s, one acquire waiting for it, and one that gave up.
func Example() {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	page := lockdebug.New(lockdebug.WithNames(), lockdebug.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	at := func(d time.Duration) time.Time { return now.Add(d) }

	// order:42 was taken 1.5 s ago after a wait of 20 ms, with a TTL of 10 s.
	page.ObserveStart(ctx, core.StartEvent{Name: "order:42", Key: "reqlock:{order:42}", Route: "/orders/:id", TTL: 10 * time.Second, Start: at(-1520 * time.Millisecond)})
	page.ObserveAcquire(ctx, core.AcquireEvent{Name: "order:42", Key: "reqlock:{order:42}", Route: "/orders/:id", TTL: 10 * time.Second,
		Start: at(-1520 * time.Millisecond), End: at(-1500 * time.Millisecond), Attempts: 1, Outcome: core.OutcomeAcquired})
	// A duplicate waited 50 ms and was answered busy; another waits since 300 ms.
	page.ObserveStart(ctx, core.StartEvent{Name: "order:42", Key: "reqlock:{order:42}", Route: "/orders/:id/pay", Start: at(-time.Second)})
	page.ObserveAcquire(ctx, core.AcquireEvent{Name: "order:42", Key: "reqlock:{order:42}", Route: "/orders/:id/pay",
		Start: at(-time.Second), End: at(-950 * time.Millisecond), Attempts: 4, Outcome: core.OutcomeBusy})
	page.ObserveStart(ctx, core.StartEvent{Name: "order:42", Key: "reqlock:{order:42}", Route: "/orders/:id/cancel", Start: at(-300 * time.Millisecond)})

	rec := httptest.NewRecorder()
	page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/reqlock/json", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	var s lockdebug.Snapshot
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		panic(err)
	}
	show := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	show(s.Held.Leases)
	show(s.Waiting.Waiters)
	fmt.Println(s.Waits.Outcomes[:2], s.Waits.ByOutcome[:2])
	for _, b := range s.Waits.Buckets {
		if b.Total > 0 {
			fmt.Println(b.Label, b.Counts[:2])
		}
	}
	// Output:
	// 200 application/json
	// [{"name":"order:42","key":"reqlock:{order:42}","route":"/orders/:id","mode":"exclusive","slot":0,"since":"2026-11-26T11:59:58.5Z","held_ms":1500,"waited_ms":20,"ttl_ms":10000,"valid_ms":8500}]
	// [{"name":"order:42","key":"reqlock:{order:42}","route":"/orders/:id/cancel","mode":"exclusive","since":"2026-11-26T11:59:59.7Z","waiting_ms":300}]
	// [acquired busy] [1 1]
	// ≤ 25ms [1 0]
	// ≤ 50ms [0 1]
}
