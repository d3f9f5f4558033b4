// Package testsvc is the small gRPC service that grpclock's tests serve over
// bufconn: requests carry an order with fields of several kinds, to derive
// lock names from.
package testsvc

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative testsvc.proto
