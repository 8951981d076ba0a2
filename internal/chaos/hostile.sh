#!/bin/sh
# internal/chaos/hostile.sh: the long variants of the hostile-client and upstream-fault
# tests (docs/reliability.md, "Upstream faults" and "Slow and hostile clients"),
# against the built limiterd binary in a process of its own, on 127.0.0.1 only.
# It prints the daemon's resident memory, open files and goroutines before, at
# the peak and after each attack; docs/reliability.md has the figures of a run.
#
#   internal/chaos/hostile.sh                  # 5 000 slowloris connections for 60 s, 500 fault rounds
#   HOSTILE_CONNS=10000 HOSTILE_SECONDS=120 HOSTILE_ROUNDS=2000 internal/chaos/hostile.sh
#
# The short variants run in `go test ./cmd/limiterd` (TestSlowloris*,
# TestUpstreamFaultsThroughDaemon, TestHugeBodiesOnEveryAdminRoute, …).
set -eu
cd "$(dirname "$0")/../.."
conns=${HOSTILE_CONNS:-5000}
# The client holds one descriptor per connection, as does limiterd.
need=$((conns + 1024))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
	ulimit -n "$need" 2>/dev/null || {
		echo "hostile.sh: open-files limit $(ulimit -n) is below $need (HOSTILE_CONNS=$conns): raise it (ulimit -n)" >&2
		exit 2
	}
fi
export HOSTILE_CONNS="$conns" HOSTILE_SECONDS="${HOSTILE_SECONDS:-60}" HOSTILE_ROUNDS="${HOSTILE_ROUNDS:-500}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/limiterd" ./cmd/limiterd
echo "slowloris: $HOSTILE_CONNS connections for $HOSTILE_SECONDS s; upstream faults: $HOSTILE_ROUNDS requests"
HOSTILE_LONG=1 HOSTILE_BIN="$tmp/limiterd" go test -count=1 -timeout 30m -run 'TestLongSlowloris|TestLongUpstreamFaults' -v ./cmd/limiterd
