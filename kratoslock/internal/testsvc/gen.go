// Package testsvc is the small service that kratoslock's tests serve with
// Kratos's transports: requests carry an order, to derive lock names from.
package testsvc

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative testsvc.proto
