#!/usr/bin/env bash
# The soak (docs/reliability.md): limiterd under steady mixed
# load for DURATION (default 30m): GETs of 3200 peers (admitted, then
# rejected until general's 5 s tick), POST /tx answered 200 by the node (a
# reduction each), admin reductions, live edits (limits, exemptions, deny
# entries), forced snapshots besides the 1 s ones and the compactions they
# bring, SIGHUP reloads. Reports goroutines, heap in use, RSS and open fds
# idle before, after the warm-up (a tenth of the run), at the end, and idle
# after; exit 1 when one grew beyond noise (idle goroutines or fds +5; the
# GC goal (twice the live heap) +50 % or 16 MiB, RSS +50 % or 32 MiB,
# whichever is more).
# With -cluster (redis-server on the PATH): two instances in cluster mode
# (backend = "redis", strict, on_failure = "local") on a redis-server of
# their own, the load split between them, one GET in 20 from a fresh peer;
# Redis's keys (DBSIZE) and used_memory are sampled too and judged (keys at
# the end at most half again the warm count plus 1 000, none of a peer left
# once idle; used_memory +50 % or 16 MiB), and any failed Redis call or
# decision made without Redis fails the soak.
# The daemons run with admin.pprof on: each one's heap profile is taken at
# the warm-up and at the end, and what the live heap gained in between is
# printed by allocation site (`go tool pprof -top -base`); SOAK_PROFILES=DIR
# keeps the profiles.
# Usage: internal/chaos/soak.sh [DURATION] [extra flags of `chaos soak`, e.g. -rate 2000, -cluster]
set -euo pipefail
cd "$(dirname "$0")/../.."
duration=${1:-30m}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/limiterd" ./cmd/limiterd
go build -o "$work/chaos" ./internal/chaos/cmd/chaos
profiles=${SOAK_PROFILES:-$work/profiles}
mkdir -p "$profiles"
status=0
"$work/chaos" soak -limiterd "$work/limiterd" -duration "$duration" -profiles "$profiles" "$@" || status=$?
for warm in "$profiles"/instance*-warm.pb.gz; do
	end=${warm%-warm.pb.gz}-end.pb.gz
	[ -f "$end" ] || continue
	echo "live heap gained from the warm-up to the end, $(basename "${warm%-warm.pb.gz}") (go tool pprof -top -base):"
	go tool pprof -top -sample_index=inuse_space -base "$warm" "$end" 2>/dev/null | sed -n '/^Showing/,$p' | head -12
done
exit $status
