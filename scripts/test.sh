#!/usr/bin/env bash
# The test command of the README: installs the servers the tests need when
# they are missing (with apt-get, when run as root: redis-server, and for the
# stores etcd-server, zookeeper, postgresql, mariadb-server, memcached; and
# chromium, the headless browser of the debug page's test), then,
# in every module of the workspace (the modules that go.work lists: the root
# module, the adapters, otel, the stores, examples and benchmarks), checks
# the formatting with gofmt, vets, builds and vets again with the newest
# supported Go (GOTOOLCHAIN=go1.27.3), and runs every test with the race
# detector, on the machine's Go, against real servers started by the tests
# on loopback. Each module is vetted and tested on a workspace of its own
# (the module and the reqlock modules it requires, from their directories:
# the module graph of a user's build at a release), not on the whole
# go.work; then the fault-history test runs on
# its own, on every store (REQLOCK_FAULTHISTORY=long ./scripts/test.sh runs
# its long variants). A module that fails does not stop the others; the
# script exits non-zero if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The servers the tests start: Debian package and how to tell it is there.
have() { command -v "$1" >/dev/null 2>&1; }
have_postgres() { have postgres || compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; }
have_zookeeper() { [ -e /usr/share/zookeeper/bin/zkServer.sh ] || have zkServer.sh; }
packages=()
have redis-server || packages+=(redis-server)
have etcd || packages+=(etcd-server)
have_zookeeper || packages+=(zookeeper)
have_postgres || packages+=(postgresql)
have mariadbd || have mysqld || packages+=(mariadb-server)
have memcached || packages+=(memcached)
# Not a server: the browser that examples/orders' TestDebugPageInChromium
# drives headless (chromedp) to check lockdebug's live page and take the
# README's screenshot. Debian's package, since a test tool's download of
# its own browser fails on machines without a general network; the test
# uses CHROMIUM_PATH when set, /usr/bin/chromium otherwise.
[ -n "${CHROMIUM_PATH:-}" ] && [ -x "$CHROMIUM_PATH" ] || have chromium || packages+=(chromium)
if [ "${#packages[@]}" -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && have apt-get; then
		echo "test.sh: ${packages[*]} missing; installing with apt-get"
		apt-get update -qq
		# The packages' services are not started: the tests start their own
		# servers on random loopback ports.
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
	else
		echo "test.sh: ${packages[*]} missing. Install them, then run this again:" >&2
		echo "  Debian/Ubuntu: sudo apt-get install ${packages[*]}" >&2
		exit 1
	fi
fi

# The newest Go release the modules support. Their go directive names the
# oldest (1.26, the machine's); each module is also built and vetted with
# this one. The go command fetches the toolchain from the module proxy the
# first time (about 76 MB) and keeps it in the module cache.
next_go=go1.27.3

# The modules, from go.work.
mapfile -t modules < <(GOWORK="$root/go.work" go list -m -f '{{.Dir}}')
if [ "${#modules[@]}" -eq 0 ]; then
	echo "test.sh: go.work lists no module" >&2
	exit 1
fi

# Each module's own workspace (see check_module), written by
# internal/release -work.
works=$(mktemp -d "${TMPDIR:-/tmp}/reqlock-test.XXXXXX")
trap 'rm -rf "$works"' EXIT
(cd internal/release && GOWORK=off go build -o "$works/release" .)

# own_work writes the workspace of the module in the directory $1 (relative
# to the root; "" for the root module) and prints its path.
own_work() {
	local w="$works/work/${1:-root}"
	mkdir -p "$w"
	"$works/release" -root "$root" -work "${1:-.}" >"$w/go.work" || return 1
	echo "$w/go.work"
}

# Every go.mod in the tree must belong to a module that go.work lists.
missing=0
while IFS= read -r gomod; do
	dir=$(cd "$(dirname "$gomod")" && pwd)
	found=0
	for m in "${modules[@]}"; do
		[ "$m" = "$dir" ] && found=1
	done
	if [ "$found" = 0 ]; then
		echo "test.sh: $gomod is not listed in go.work (add it with: go work use ${dir#"$root"/})" >&2
		missing=1
	fi
done < <(find . -path ./.git -prune -o -name go.mod -print)
[ "$missing" = 0 ] || exit 1

# go_files prints the .go files of the module in the current directory,
# leaving out those of the modules nested in it.
go_files() {
	local prune=() m
	for m in "${modules[@]}"; do
		case "$m" in
		"$PWD"/*) prune+=(-path "./${m#"$PWD"/}" -prune -o) ;;
		esac
	done
	find . -path ./.git -prune -o "${prune[@]}" -name '*.go' -print
}

# check_module formats, vets and tests the module in the current directory,
# $1 relative to the root, on its own workspace: the go.mod files name their
# sibling modules at a version (the release's), which the workspace serves
# from their directories.
check_module() {
	local unformatted work
	work=$(own_work "$1") || return 1
	unformatted=$(go_files | xargs -r gofmt -l) || return 1
	if [ -n "$unformatted" ]; then
		echo "test.sh: files not formatted with gofmt:" >&2
		echo "$unformatted" >&2
		return 1
	fi
	GOWORK=$work go vet ./... || return 1
	# The same code on the newest supported Go: it must build and vet there
	# too. The race tests below stay on the machine's Go.
	if ! { GOWORK=$work GOTOOLCHAIN=$next_go go build ./... &&
		GOWORK=$work GOTOOLCHAIN=$next_go go vet ./...; }; then
		echo "test.sh: go build or go vet failed with Go ${next_go#go} (GOTOOLCHAIN=$next_go)" >&2
		return 1
	fi
	# One package at a time (-p 1): the lock tests measure time (TTLs of a
	# few hundred milliseconds, watchdog renewals), and two race-enabled
	# packages with their redis-servers side by side on a 2-core machine
	# stall each other past those bounds.
	# The fault history runs below, on its own: never within the modules.
	REQLOCK_FAULTHISTORY= GOWORK=$work go test -race -count=1 -p 1 ./... || return 1
}

failed=()
for m in "${modules[@]}"; do
	rel=${m#"$root"}
	rel=${rel#/}
	echo
	echo "=== module $(cd "$m" && GOWORK=off go list -m) (${rel:-.})"
	if ! (cd "$m" && check_module "$rel"); then
		failed+=("${rel:-.}")
	fi
done

# The fault-history test runs on its own, after the modules: it loads a
# small machine with several processes under fault (about 1 min on Redis
# through go-redis, in internal/faulthistory; 2 min on the other stores, in
# the module internal/faulthistory/stores), and its figures are timings,
# which other tests running beside it would skew (and it theirs). Within
# the modules' runs above it is skipped. REQLOCK_FAULTHISTORY=long runs
# the long variants too (both variants of every store, a cut link, an etcd
# cluster and a ZooKeeper ensemble whose leader is killed: about 8 min).
fault_history=${REQLOCK_FAULTHISTORY:-1}
for dir in internal/faulthistory internal/faulthistory/stores; do
	echo
	echo "=== fault history ($dir, REQLOCK_FAULTHISTORY=$fault_history)"
	mod=$dir
	[ -f "$dir/go.mod" ] || mod=
	if ! work=$(own_work "$mod") ||
		! (cd "$dir" && REQLOCK_FAULTHISTORY=$fault_history GOWORK=$work go test -race -count=1 -v -timeout 40m -run '^TestFaultHistory$' .); then
		failed+=("$dir (fault history)")
	fi
done

echo
if [ "${#failed[@]}" -gt 0 ]; then
	echo "test.sh: failed in: ${failed[*]}" >&2
fi
echo "(checks: the ${#modules[@]} modules and the fault history's 2)"
echo "checks: $((${#modules[@]} + 2 - ${#failed[@]})) passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
