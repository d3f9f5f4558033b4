// Package lockbench measures what a Redis lock costs, reqlock against the
// plain spin lock and its Go peers in the same run, on a real redis-server,
// in four scenarios. The contention experiment: 3 worker processes, each
// making 400 attempts in rounds of 4 parallel acquires (4 goroutines) of one
// lock name, lock_key (1200 attempts in all); wait 3 s, TTL 10 s, sleep
// 10–20 ms between attempts, a critical section of two round trips. It
// counts the commands Redis executed (INFO commandstats) and the Redis round
// trips each lock made. Then a continuous hot key, uncontended acquires of
// distinct names, and the scaling of one name from 3 to 192 contenders over
// 3 processes. Targets checks the run against the goals of the fair queue
// (core.WithFair).
//
// The stores section runs reqlock's Locker on each of its stores (Stores:
// Redis through go-redis as the reference, rueidis, etcd, ZooKeeper,
// PostgreSQL, MariaDB, memcached): uncontended acquires, and the contention
// experiment with the default setting, the hotspot Guard with hand-off, and
// the fair queue on the stores that implement core.Queuer. The runner
// starts each server (internal/servers) behind a delaying proxy of its own,
// which counts the request/response exchanges of the store's clients; the
// critical section and the overlap check stay on the benchmark's Redis.
//
// The plain spin lock is the baseline: the single-instance lock of the Redis
// documentation (SET NX PX to acquire, a compare-and-delete script to
// release; https://redis.io/docs/latest/develop/use/patterns/distributed-locks/),
// retried after a random sleep while the name is held.
//
// Every client reaches Redis through a TCP proxy that delays each exchange
// by the same simulated round trip (Params.RTT), so that the round trips a
// lock makes cost what they cost on a network.
//
// Each implementation under test is an Impl: a name and a constructor of the
// Lock a worker process uses. Add peers to Impls; the runner, the workers and
// the tables are shared. Workers are the running binary itself, started again
// with an environment variable: a main (or TestMain) must call
// RunWorkerIfChild first.
//
// Run the contention experiment alone with
//
//	cd benchmarks && go run ./cmd/contention
//
// the stores section alone with
//
//	cd benchmarks && go run ./cmd/compare -stores all
//
// and everything, regenerating README.md and its charts, with
//
//	cd benchmarks && go run ./cmd/compare -write
package lockbench
