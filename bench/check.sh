#!/usr/bin/env bash
# Decision throughput of limiterd's sidecar endpoints on loopback, one run:
#   (a) POST /api/v1/check, JSON, 10 000 peers (bench/check.lua),
#   (b) GET /api/v1/check/auth, nginx auth_request's subrequest, the same
#       10 000 peers (skipped on a limiterd without that endpoint),
#   (c) for comparison, the proxy path: GET /info through limiterd's public
#       listener to a fast upstream, 10 000 other peers named in
#       X-Forwarded-For by a trusted 127.0.0.1 (bench/xff.lua, as proxy.sh),
# all with keep-alive, against one limiterd built from ./cmd/limiterd with a
# config in a temp dir (default limits: general 450 per 30 s, 150 in flight).
#
# Every admission of (a) holds its in-flight slot for admin.check_lease (30 s)
# since nobody releases it: at R decisions/s over T s each of the 10 000
# peers holds R·min(T,30)/10 000 slots, under general's concurrency_limit of
# 150 while R·T < 1 500 000 (a 10 s run up to 150 000/s), and spends as many
# tokens of its 450. Longer or faster runs turn into 429s (counted as
# non-2xx below). (b) releases at once. Target: (a) ≥ 20 000 decisions/s.
# Needs: apt-get install wrk. Usage: bench/check.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${2:-64}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }

go build -o "$work/limiterd" ./cmd/limiterd
go -C bench build -o "$work/benchnode" ./cmd/benchnode

"$work/benchnode" -listen 127.0.0.1:18080 & pids+=($!)
cat > "$work/limiterd.toml" <<TOML
[server]
listen = "127.0.0.1:18081"
upstream = "http://127.0.0.1:18080"
data_dir = "$work/data"
[admin]
listen = "127.0.0.1:18086"
token = "bench"
[peers]
trusted_proxies = ["127.0.0.1/32"]
forwarded_header = "x-forwarded-for"
TOML
"$work/limiterd" -config "$work/limiterd.toml" 2>"$work/limiterd.log" & pids+=($!)
for _ in $(seq 50); do curl -sf http://127.0.0.1:18086/healthz >/dev/null && break; sleep 0.1; done

run() { # name url script [script args]
  local out
  out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$3" "$2" ${4:+-- "$4"} 2>&1)
  local rps p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  printf '%-38s %12s req/s   p99 %8s   non-2xx %s\n' "$1" "$rps" "$p99" "${non2xx:-0}"
}
echo "wrk -t2 -c$conns -d${secs}s, $(nproc) cores, $(date -u +%FT%TZ)"
run "(a) POST /api/v1/check, 10k peers" http://127.0.0.1:18086/api/v1/check bench/check.lua
auth=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer bench' -H 'X-Original-Method: GET' \
  -H 'X-Original-URI: /info' -H 'X-Real-IP: 192.0.2.1' http://127.0.0.1:18086/api/v1/check/auth)
if [ "$auth" = 204 ]; then
  run "(b) GET /api/v1/check/auth, 10k peers" http://127.0.0.1:18086/api/v1/check/auth bench/check.lua auth
else
  echo "(b) GET /api/v1/check/auth: skipped (answered $auth)"
fi
run "(c) proxy GET /info, 10k peers (XFF)" http://127.0.0.1:18081/info bench/xff.lua
metric() { curl -s http://127.0.0.1:18086/metrics | awk -v s="$1" 'index($0, s" ") == 1 {print $2}'; }
echo "general: requests $(metric 'ar_limiter_requests_total{limiter_id="general"}'), rejected $(metric 'ar_limiter_rejected_total{limiter_id="general",reason="concurrency"}') (concurrency) $(metric 'ar_limiter_rejected_total{limiter_id="general",reason="rate_limit"}') (rate_limit)"
