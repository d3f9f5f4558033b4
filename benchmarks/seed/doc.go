// Package seed reproduces the experiment of the seed document on a real
// redis-server and compares reqlock with its peers in the same run: several
// worker processes, each running rounds of parallel acquires of one lock
// name with a short critical section, counting the commands Redis executed
// (INFO commandstats) and the Redis round trips each lock made; then a
// continuous hot key, and uncontended acquires of distinct names.
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
// Run the seed experiment alone with
//
//	cd benchmarks && go run ./cmd/seed
//
// and everything, regenerating README.md and its chart, with
//
//	cd benchmarks && go run ./cmd/compare -write
package seed
