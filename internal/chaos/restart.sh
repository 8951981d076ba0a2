#!/usr/bin/env bash
# Restarts under load (docs/reliability.md, "Restarts under load"):
# limiterd on listening sockets held by the driver as systemd's
# limiterd.socket holds them, a steady load on 127.0.0.1, and RESTARTS
# restarts (default 10) as `systemctl restart limiterd` makes them: SIGTERM,
# the exit, a new process on the same sockets. Every request carries an id
# the node records. Two runs: the driver's own load (half keep-alive
# connections, half one per request; never retrying), then wrk's (paced by
# a script). Exit 1 when a request got no answer (refused, reset, closed,
# timed out), the node saw one twice, or the probe peer exhausted before
# the restarts was admitted by a new process (its state restored late).
# Usage: internal/chaos/restart.sh [RESTARTS] [extra flags of `chaos restart`, e.g. -rate 2000 -conns 32]
set -euo pipefail
cd "$(dirname "$0")/../.."
restarts=${1:-10}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/limiterd" ./cmd/limiterd
go build -o "$work/chaos" ./internal/chaos/cmd/chaos
status=0
"$work/chaos" restart -limiterd "$work/limiterd" -restarts "$restarts" "$@" || status=1
if command -v wrk >/dev/null; then
  "$work/chaos" restart -limiterd "$work/limiterd" -restarts "$restarts" -wrk "$(command -v wrk)" "$@" || status=1
else
  echo "wrk is not installed (apt-get install wrk): the wrk run did not run" >&2
  status=1
fi
exit $status
