#!/usr/bin/env bash
# The crash loop (docs/reliability.md): limiterd under load on
# its public listener, live edits made through the admin API all the while
# (group limits, exemptions, deny entries; every 2xx recorded), killed with
# SIGKILL at a random moment of each round, 20 rounds by default. After
# each kill: the bbolt file opens read-only and passes tx.Check, limiterd
# restarts, every acknowledged edit is there, and a probe peer's restored
# state is at most one snapshot.interval (plus a second for the write)
# older than what it had been told. Then the same in cluster mode: two
# instances on one redis-server (on a free loopback port), one instance
# killed each round and Redis killed with -9 every other round; the
# instances answer while Redis is down and share one limit once it is back.
# Exit 1 on any violation.
# Usage: internal/chaos/crashloop.sh [rounds] [extra flags of `chaos crashloop`, e.g. -seed N -interval 2s]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-20}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/limiterd" ./cmd/limiterd
go build -o "$work/chaos" ./internal/chaos/cmd/chaos
status=0
"$work/chaos" crashloop -limiterd "$work/limiterd" -rounds "$rounds" "$@" || status=1
if command -v redis-server >/dev/null; then
  "$work/chaos" crashloop -cluster -limiterd "$work/limiterd" -rounds "$rounds" "$@" || status=1
else
  echo "redis-server is not installed (apt-get install redis-server): the cluster rounds did not run" >&2
  status=1
fi
exit $status
