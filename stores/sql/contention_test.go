package sqlstore_test

import (
	"sync"
	"testing"
	"time"

	sqlstore "github.com/reqlock/reqlock/stores/sql"
)

// TestContendedFirstAcquire: clients that race for a key nobody has locked
// yet (no row: their upserts collide on the insert) or whose lock has just
// expired get exactly one winner and no error, also under the strictest
// isolation level a database may be configured with.
func TestContendedFirstAcquire(t *testing.T) {
	for _, b := range backends {
		params := []string{""}
		if b.dialect == sqlstore.PostgreSQL {
			params = append(params, "default_transaction_isolation=serializable")
		} else {
			params = append(params, "tx_isolation=%27SERIALIZABLE%27")
		}
		for _, p := range params {
			t.Run(b.name+"/"+p, func(t *testing.T) {
				const clients, rounds = 6, 30
				stores := make([]*sqlstore.Store, clients)
				for i := range stores {
					stores[i] = newStore(t, b.open(t, b.addr(), p))
				}
				for round := range rounds {
					k := key(t)
					ttl := time.Minute
					if round%2 == 1 { // the key's lock expires: the clients race to take it over
						mustAcquire(t, stores[0], k, token(), time.Millisecond, false)
						time.Sleep(5 * time.Millisecond)
					}
					var wg sync.WaitGroup
					var mu sync.Mutex
					won := 0
					start := make(chan struct{})
					for _, s := range stores {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							ok, _, err := s.TryAcquire(call(t), k, token(), ttl, true)
							mu.Lock()
							defer mu.Unlock()
							if err != nil {
								t.Errorf("round %d: TryAcquire: %v", round, err)
							}
							if ok {
								won++
							}
						}()
					}
					close(start)
					wg.Wait()
					if won != 1 {
						t.Fatalf("round %d: %d clients took the key; want 1", round, won)
					}
				}
			})
		}
	}
}
