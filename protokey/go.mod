module github.com/reqlock/reqlock/protokey

go 1.26.0

require (
	github.com/reqlock/reqlock v0.1.0
	google.golang.org/protobuf v1.36.12
)
