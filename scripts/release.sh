#!/usr/bin/env bash
# release.sh vX.Y.Z prepares a lockstep release of every module in the
# current clone: each module's requirements on the other reqlock modules
# set to vX.Y.Z and their replace directives dropped (the committed go.work
# keeps local development on the sibling directories, replacing each module
# at vX.Y.Z by its directory until the tags are published), the CHANGELOG's
# Unreleased section dated as X.Y.Z, one release commit, and on it one tag
# per released module: vX.Y.Z for the root module, DIR/vX.Y.Z for the
# module in DIR (ginlock/vX.Y.Z, stores/etcd/vX.Y.Z, ...). The modules under
# internal/, benchmarks and examples are part of the commit but not tagged:
# nobody imports them. The edits are made by internal/release (with
# golang.org/x/mod). Pushing stays a person's step; the script prints the
# command.
#
# The modules are released in lockstep, always all at one version: the
# adapters and stores use the root module's internal packages (the shared
# middleware flow, the clean-up queue, the Redis scripts), which may change
# between versions, so each module requires its siblings at exactly its own
# version. Upgrade them together.
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: scripts/release.sh vX.Y.Z (a semantic version, e.g. v0.1.0 or v1.2.0-rc.1)" >&2
	exit 2
fi
version=$1

cd "$(git rev-parse --show-toplevel)"
root=$PWD
if [ -n "$(git status --porcelain)" ]; then
	echo "release.sh: the work tree has uncommitted changes; commit or stash them first" >&2
	exit 1
fi

# Until the release commit is made, a failure puts the files back.
trap 'git reset -q && git checkout -q -- .' ERR
tags=$(cd internal/release && GOWORK=off go run . -root "$root" -version "$version")
for tag in $tags; do
	if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
		git checkout -q -- .
		echo "release.sh: tag $tag exists already" >&2
		exit 1
	fi
done

git add -A
git commit -q -m "release $version"
trap - ERR
count=0
for tag in $tags; do
	git tag -a "$tag" -m "reqlock $version"
	count=$((count + 1))
done
echo "release.sh: tagged $(git rev-parse --short HEAD) with $count tags:" $tags
echo "release.sh: to publish, push the commit and the tags:"
echo "  git push origin HEAD" $tags
