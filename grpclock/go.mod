module github.com/reqlock/reqlock/grpclock

go 1.26.0

require (
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0 // indirect
	google.golang.org/grpc v1.80.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.41.0 // indirect
	go.opentelemetry.io/otel/sdk/metric v1.41.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/text v0.34.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260209200024-4cfbd4190f57 // indirect
)

require (
	github.com/reqlock/reqlock v0.0.0-00010101000000-000000000000
	github.com/reqlock/reqlock/protokey v0.0.0-00010101000000-000000000000
)

replace (
	github.com/reqlock/reqlock => ../
	github.com/reqlock/reqlock/protokey => ../protokey
)
