#!/usr/bin/env bash
# Throughput of POST /api/v1/throttle/observe (the adaptive outbound
# throttle learning a reply's ratelimit-* fields, docs/throttle.md) on loopback
# with keep-alive, against one limiterd built from ./cmd/limiterd with
# throttle.mode = "adaptive" and a config in a temp dir: 1 000 peers × 4
# paths (bench/observe.lua). For comparison in the same run, the baseline
# GET /healthz (the admin listener's cheapest route, no token, no body).
# Target: observe ≥ 20 000 calls/s.
# Needs: apt-get install wrk. Usage: bench/observe.sh [seconds] [connections] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${2:-64}
rounds=${3:-3}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }

go build -o "$work/limiterd" ./cmd/limiterd
cat > "$work/limiterd.toml" <<TOML
[server]
listen = "127.0.0.1:18091"
upstream = "http://127.0.0.1:18090"
data_dir = "$work/data"
[admin]
listen = "127.0.0.1:18096"
token = "bench"
[throttle]
mode = "adaptive"
TOML
"$work/limiterd" -config "$work/limiterd.toml" 2>"$work/limiterd.log" & pids+=($!)
for _ in $(seq 50); do curl -sf http://127.0.0.1:18096/healthz >/dev/null && break; sleep 0.1; done

run() { # name url [script]
  local out
  out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency ${3:+-s "$3"} "$2" 2>&1)
  local rps p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  printf '%-40s %12s req/s   p99 %8s   non-2xx %s\n' "$1" "$rps" "$p99" "${non2xx:-0}"
}
echo "wrk -t2 -c$conns -d${secs}s, $(nproc) cores, $(date -u +%FT%TZ), A/B alternated $rounds rounds"
for r in $(seq "$rounds"); do
  run "round $r: POST /api/v1/throttle/observe" http://127.0.0.1:18096/api/v1/throttle/observe bench/observe.lua
  run "round $r: GET /healthz (baseline)" http://127.0.0.1:18096/healthz
done
metric() { curl -s http://127.0.0.1:18096/metrics | awk -v s="$1" 'index($0, s" ") == 1 {print $2}'; }
echo "learned $(metric 'limiterd_throttle_observe_total{result="learned"}'), peers $(metric limiterd_throttle_adaptive_peers), quotas $(metric limiterd_throttle_adaptive_quotas)"
