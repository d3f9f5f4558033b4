// Package testsvc is the small connect service that connectlock's tests
// serve on a loopback HTTP server: requests carry an order, to derive lock
// names from.
package testsvc

//go:generate protoc --go_out=. --go_opt=paths=source_relative --connect-go_out=. --connect-go_opt=paths=source_relative testsvc.proto
