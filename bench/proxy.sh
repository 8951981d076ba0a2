#!/usr/bin/env bash
# Proxy throughput on loopback, one run: wrk against
#   (a) limiterd, default config, 10 000 peers named through a trusted proxy
#       (every request runs the full hybrid decision),
#   (b) a bare httputil.ReverseProxy (no limiter), and (b') the same with
#       limiterd's buffer pool — the baseline that isolates the limiter,
#   (c) nginx (nginx-light) with limit_req 15r/s burst=450 nodelay and
#       limit_conn 150 per peer, keyed like (a) — the general group's limits,
#   (d) limiterd answering a flood of rejections from one peer,
# all in front of one fast upstream. Needs: apt-get install wrk nginx-light.
# Usage: bench/proxy.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
conns=${2:-64}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }

go build -o "$work/limiterd" ./cmd/limiterd
go build -o "$work/benchnode" ./bench/cmd/benchnode
go build -o "$work/bareproxy" ./bench/cmd/bareproxy

"$work/benchnode" -listen 127.0.0.1:18080 & pids+=($!)
"$work/bareproxy" -listen 127.0.0.1:18082 -upstream http://127.0.0.1:18080 & pids+=($!)
"$work/bareproxy" -listen 127.0.0.1:18084 -upstream http://127.0.0.1:18080 -pool & pids+=($!)
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
TOML
"$work/limiterd" -config "$work/limiterd.toml" 2>"$work/limiterd.log" & pids+=($!)

if command -v nginx >/dev/null; then
  mkdir -p "$work/nginx"
  cat > "$work/nginx.conf" <<NGINX
daemon off;
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx; proxy_temp_path $work/nginx; fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx; scgi_temp_path $work/nginx;
  limit_req_zone \$http_x_forwarded_for zone=perip:64m rate=15r/s;
  limit_conn_zone \$http_x_forwarded_for zone=perconn:64m;
  limit_req_status 429; limit_conn_status 429;
  upstream node { server 127.0.0.1:18080; keepalive 256; }
  server {
    listen 127.0.0.1:18083;
    location / {
      limit_req zone=perip burst=450 nodelay;
      limit_conn perconn 150;
      proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_pass http://node;
    }
  }
}
NGINX
  nginx -c "$work/nginx.conf" -p "$work/nginx" & pids+=($!)
fi
sleep 1

run() { # name url script
  local out
  out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$3" "$2" 2>&1)
  local rps p99 non2xx
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  printf '%-34s %12s req/s   p99 %8s   non-2xx %s\n' "$1" "$rps" "$p99" "${non2xx:-0}"
}
echo "wrk -t2 -c$conns -d${secs}s, $(nproc) cores, $(date -u +%FT%TZ)"
run "(b) bare Go ReverseProxy" http://127.0.0.1:18082/info bench/xff.lua
run "(b') bare Go proxy + buffer pool" http://127.0.0.1:18084/info bench/xff.lua
run "(a) limiterd, 10k peers admitted" http://127.0.0.1:18081/info bench/xff.lua
if command -v nginx >/dev/null; then
  run "(c) nginx limit_req+limit_conn" http://127.0.0.1:18083/info bench/xff.lua
fi
run "(d) limiterd, one peer rejected" http://127.0.0.1:18081/info bench/onepeer.lua
up=$(curl -s http://127.0.0.1:18086/metrics | awk '/^ar_limiter_rejected_total\{limiter_id="general",reason="rate_limit"\}/ {print $2}')
echo "limiterd rejections counted: ${up:-?}"
