#!/usr/bin/env bash
# The flood of distinct peers (docs/reliability.md): limiterd
# with peers.max_tracked = 100000 behind a trusted 127.0.0.1, one request
# from each of 900 000 IPv4 and 100 000 IPv6 (/64) peers named in
# X-Forwarded-For over 32 keep-alive connections, while a polite peer sends
# a request every second and an IPv6 attacker rotates inside one /64.
# Reports limiterd's resident memory (peak sampled and VmHWM), evictions,
# whether the polite peer was ever evicted, whether the /64 counted as one
# peer, and whether an abuser exhausted before the flood is still limited
# after it. Exit 1 when the polite peer was evicted or the /64 split.
# Usage: internal/chaos/flood.sh [extra flags of `chaos flood`, e.g. -ipv4 N -ipv6 N -max-tracked N -rate R]
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/limiterd" ./cmd/limiterd
go build -o "$work/chaos" ./internal/chaos/cmd/chaos
"$work/chaos" flood -limiterd "$work/limiterd" -ipv4 900000 -ipv6 100000 -max-tracked 100000 "$@"
