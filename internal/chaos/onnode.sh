#!/usr/bin/env bash
# What a client puts on the node (docs/reliability.md), the long variants,
# against the built limiterd binary in a process of its own, on 127.0.0.1
# only, each for CHAOS_DURATION (default 3m) and stopping by itself:
#
#   aborts       waves of clients that hang up on a node that does not
#                notice; the node never works on more than concurrency_limit
#                of one peer's requests
#   slowreaders  slow readers holding twice the node's pool in answers; a
#                victim peer's median within 2× its median alone, never 504
#   checkflood   distinct peers through POST /api/v1/check, none releasing;
#                tracked entries and slots held within max_tracked, memory
#                bounded, no slot held once the leases end
#   crowd        a crowd of peers inside their limits offering 3× a node's
#                capacity, adaptive concurrency on: the node never holds
#                more than the fair share's ceiling, every crowd peer gets a
#                fair share, a polite peer ≥ 95 % answered, nothing left
#                in flight
#
# Usage: internal/chaos/onnode.sh [aborts|slowreaders|checkflood|crowd ...]   (default: all four)
#        CHAOS_DURATION=1m internal/chaos/onnode.sh checkflood
# Exit 1 when a run found a violation.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/limiterd" ./cmd/limiterd
go build -o "$work/chaos" ./internal/chaos/cmd/chaos
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(aborts slowreaders checkflood crowd)
status=0
for r in "${runs[@]}"; do
	echo "== $r for ${CHAOS_DURATION:-3m}"
	"$work/chaos" "$r" -limiterd "$work/limiterd" -duration "${CHAOS_DURATION:-3m}" || status=1
done
exit $status
