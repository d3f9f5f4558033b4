// Package ordersv1 is the gRPC API of the orders example.
package ordersv1

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative orders.proto
