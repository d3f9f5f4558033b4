module github.com/reqlock/reqlock/connectlock

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/reqlock/reqlock v0.1.0
	github.com/reqlock/reqlock/protokey v0.1.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
