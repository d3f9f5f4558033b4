module github.com/reqlock/reqlock/grpclock

go 1.24

require (
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.3
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0 // indirect
	google.golang.org/grpc v1.75.1
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.opentelemetry.io/otel v1.38.0 // indirect
	go.opentelemetry.io/otel/sdk/metric v1.38.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250825161204-c5933d9347a5 // indirect
)

require github.com/reqlock/reqlock v0.0.0-00010101000000-000000000000

replace github.com/reqlock/reqlock => ../
