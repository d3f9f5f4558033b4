module github.com/reqlock/reqlock/protokey

go 1.26.0

require (
	github.com/reqlock/reqlock v0.0.0-00010101000000-000000000000
	google.golang.org/protobuf v1.36.12
)

replace github.com/reqlock/reqlock => ../
