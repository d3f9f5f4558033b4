module github.com/reqlock/reqlock/benchmarks

go 1.24.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.15.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/redis/rueidis v1.0.69
	github.com/reqlock/reqlock v0.0.0
	go.uber.org/goleak v1.3.0
	golang.org/x/image v0.36.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/golang-lru/v2 v2.0.7 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

replace github.com/reqlock/reqlock => ../
