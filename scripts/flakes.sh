#!/usr/bin/env bash
# The flake finder: runs the README's test command (./scripts/test.sh) N
# times, each in a fresh clone of this repository's committed HEAD, and
# prints, per failing test, how many runs it failed and the first lines of
# each failure. With --busy, one core is kept busy by a CPU hog for the
# whole of each run, as on a loaded CI machine. A test that fails in any run
# is a defect to fix, not to retry.
#
#   scripts/flakes.sh 10          # ten runs on an idle machine
#   scripts/flakes.sh 5 --busy    # five runs with one core kept busy
#
# The logs stay in the directory printed at the start (FLAKES_DIR chooses
# it). Exits non-zero if any run failed.
set -euo pipefail

usage() {
	echo "usage: scripts/flakes.sh N [--busy]" >&2
	exit 2
}
[ $# -ge 1 ] || usage
runs=$1
shift
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || usage
busy=0
for arg in "$@"; do
	case "$arg" in
	--busy) busy=1 ;;
	*) usage ;;
	esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${FLAKES_DIR:-$(mktemp -d -t reqlock-flakes.XXXXXX)}
mkdir -p "$out"
commit=$(git -C "$repo" rev-parse --short HEAD)
echo "flakes.sh: $runs run(s) of ./scripts/test.sh at $commit$([ "$busy" = 1 ] && echo ", one core busy"); logs in $out"

hog=
stop_hog() {
	if [ -n "$hog" ]; then
		kill "$hog" 2>/dev/null || true
		wait "$hog" 2>/dev/null || true
		hog=
	fi
}
# Each run is a process group of its own (setsid), so that an interrupted
# flakes.sh ends the run's test binaries and servers too, not only its shell.
run=
stop_run() {
	if [ -n "$run" ]; then
		kill -TERM -- "-$run" 2>/dev/null || true
		sleep 1
		kill -KILL -- "-$run" 2>/dev/null || true
		run=
	fi
}
trap 'stop_run; stop_hog' EXIT
trap 'exit 130' INT TERM

failed_runs=0
for i in $(seq 1 "$runs"); do
	dir=$(mktemp -d -t reqlock-flakes-clone.XXXXXX)
	git clone -q "$repo" "$dir/p"
	if [ "$busy" = 1 ]; then
		# One busy-looping process: a second core's worth of load.
		bash -c 'while :; do :; done' &
		hog=$!
	fi
	log="$out/run-$i.log"
	start=$(date +%s)
	rc=0
	setsid bash -c 'cd "$1" && CI=true exec ./scripts/test.sh' flakes "$dir/p" >"$log" 2>&1 </dev/null &
	run=$!
	wait "$run" || rc=$?
	run=
	secs=$(($(date +%s) - start))
	stop_hog
	rm -rf "$dir"
	if [ "$rc" = 0 ]; then
		echo "run $i: passed in ${secs} s"
	else
		failed_runs=$((failed_runs + 1))
		echo "run $i: FAILED (exit $rc) in ${secs} s: $(grep -c -- '^\s*--- FAIL' "$log" || true) failing test(s)"
	fi
done

# Failures per test: each '--- FAIL: Name' line with the lines that follow
# it up to the next test's verdict, from every log.
echo
if [ "$failed_runs" = 0 ]; then
	echo "flakes.sh: $runs of $runs runs passed"
	exit 0
fi
echo "flakes.sh: $failed_runs of $runs runs failed; failures per test:"
awk '
	FNR == 1 { run = FILENAME; sub(/.*run-/, "", run); sub(/\.log$/, "", run) }
	/^=== module / { module = $3 }
	/^[[:space:]]*--- FAIL: / {
		name = $3
		key = module " " name
		count[key]++
		runs[key] = runs[key] " " run
		grab = 4
		next
	}
	grab > 0 && !/^[[:space:]]*(--- |=== |FAIL|ok )/ {
		if (length(first[key]) < 2000) first[key] = first[key] "\n      run " run ": " $0
		grab--
		next
	}
	{ grab = 0 }
	/^FAIL[[:space:]]/ && NF >= 2 && $2 != "" { pkgfail[module " " $2]++ }
	/^test.sh: / { other[$0]++ }
	END {
		for (k in count) printf "  %s: failed in %d run(s):%s%s\n", k, count[k], runs[k], first[k]
		for (k in pkgfail) printf "  package %s: FAIL in %d run(s)\n", k, pkgfail[k]
		for (k in other) printf "  %s (%d run(s))\n", k, other[k]
	}
' "$out"/run-*.log
exit 1
