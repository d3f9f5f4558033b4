// Package scale is the measuring harness of issue 24: what reqlock costs at
// scale, each figure against a floor of the same Redis commands sent by
// hand, on real servers that it starts on 127.0.0.1.
//
//   - Middleware: a request through ginlock, httplock and grpclock against
//     the same server whose handler sends SET NX PX and the
//     compare-and-delete script by hand (time and allocations per request,
//     Go benchmarks run by testing.Benchmark), with bsm/redislock's
//     allocations for the same two commands beside them.
//   - Many names: Lockers × goroutines over many names, uniform or Zipf
//     (math/rand/v2), against the plain spin lock of the Redis documentation
//     retried by hand with the same sleep (lock cycles per second), with the
//     Redis CPU per cycle (INFO commandstats, INFO cpu).
//   - Memory: MEMORY USAGE per held lock and per fair waiter, beside
//     bsm/redislock's and redsync's held lock.
//   - Cluster: the many-names run on a 3-primary Redis Cluster beside one
//     primary (per-primary commands and CPU, MOVED/ASK and CROSSSLOT errors
//     from INFO errorstats) and a model of cycles per second per primary
//     core; etcd and ZooKeeper, 3 members against one.
//   - Hand-over: on one hot name, the gap between a release and the next
//     holder's start, across Lockers and local (the hotspot Guard's
//     hand-off), against one round trip, and the share of the wall time the
//     name is held.
//
// In the many-names, cluster and hand-over runs each contender (a Locker,
// the floor or a peer, with a client of its own) is a worker process: the
// program started again (its main calls RunWorkerIfChild first), started
// together with the others once all are warmed up; Params.Processes false
// runs them as Lockers of one process instead. etcd and ZooKeeper run their
// Lockers in the runner's process.
//
//	cd benchmarks && go run ./cmd/scale -write
package scale
