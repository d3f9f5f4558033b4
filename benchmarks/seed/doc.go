// Package seed reproduces the experiment of the seed document on a real
// redis-server: several worker processes, each running rounds of parallel
// acquires of one lock name, with a short critical section, and counting the
// SET commands Redis executed (INFO commandstats) and the Redis round trips
// each lock made.
//
// Each implementation under test is an Impl: a name and a constructor of the
// Lock a worker process uses. Add peers to Impls; the runner, the workers and
// the table are shared. Workers are the running binary itself, started again
// with an environment variable: a main (or TestMain) must call
// RunWorkerIfChild first.
//
// Run the experiment with
//
//	cd benchmarks && go run ./cmd/seed
package seed
