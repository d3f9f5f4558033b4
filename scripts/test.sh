#!/usr/bin/env bash
# The test command of the README: installs redis-server when it is missing
# (with apt-get, when run as root), then vets and runs every test with the race
# detector against real redis-server processes started by the tests, in the
# main module and in the benchmarks module (a smoke run of every
# implementation compared there).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "test.sh: redis-server is missing; installing it with apt-get"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
	else
		echo "test.sh: redis-server is missing. Install it, then run this again:" >&2
		echo "  Debian/Ubuntu: sudo apt-get install redis-server" >&2
		echo "  macOS:         brew install redis" >&2
		exit 1
	fi
fi

unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "test.sh: files not formatted with gofmt:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
go test -race -count=1 ./...
(cd benchmarks && go vet ./... && go test -race -count=1 ./...)
