#!/usr/bin/env bash
# Cleartext HTTP/2 on loopback, one run, every server in front of the same
# upstream (bench/cmd/benchnode, HTTP/1.1, answering {"ok":true}), with
# h2load (8 connections x 32 streams unless told), the targets alternated
# for $rounds rounds:
#   (a) limiterd, h2c on its public listener, every stream decided (one
#       peer, 127.0.0.1, not exempt; general's limits raised so that every
#       request is admitted: the decision runs, nothing is refused);
#   (n) nginx, `listen ... http2` (h2c), limit_req and limit_conn per
#       address on, as loose;
#   (p) HAProxy, `bind ... proto h2`, a stick table tracking each address's
#       request rate and connections, a deny rule above a rate never reached;
#   (g) the floor of a Go h2c proxy: net/http's HTTP/2 server proxying
#       through an http.Transport, nothing else (bench/cmd/h2impl -std);
#   (s) the floor of the Go HTTP/2 server alone: the same answer made
#       locally, no upstream (bench/cmd/h2impl).
# Then the implementation choice: net/http's HTTP/2 server against
# x/net/http2's ServeConn, both answering locally, alternated; and the way
# to the node: limiterd with server.upstream_protocol "http1" against
# "h2c", in front of one net/http node stand-in speaking both (benchnode
# -h2c-listen), under h2load (HTTP/2 clients) and wrk (HTTP/1.1 clients).
# Throughput is h2load's req/s; p99 is computed from h2load's per-request
# log (--log-file). 2 shared cores: read the medians and their ratios.
# Needs: apt-get install nghttp2-client nginx-light haproxy.
# Usage: bench/h2.sh [seconds] [rounds] [connections] [streams]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/sbin
secs=${1:-5}
rounds=${2:-3}
conns=${3:-8}
streams=${4:-32}
work=$(mktemp -d)
pids=()
cleanup() {
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for tool in h2load nginx haproxy; do
  command -v $tool >/dev/null || { echo "$tool is not installed (apt-get install nghttp2-client nginx-light haproxy)"; exit 1; }
done

go -C bench build -o "$work/benchnode" ./cmd/benchnode
go -C bench build -o "$work/h2impl" ./cmd/h2impl
go build -o "$work/limiterd" ./cmd/limiterd

"$work/benchnode" -listen 127.0.0.1:18080 -h2c-listen 127.0.0.1:18090 & pids+=($!)
"$work/h2impl" -xnet 127.0.0.1:18110 -std 127.0.0.1:18111 & pids+=($!)
"$work/h2impl" -xnet 127.0.0.1:18112 -std 127.0.0.1:18113 -upstream 127.0.0.1:18080 & pids+=($!)
cat > "$work/limiterd.toml" <<TOML
[server]
listen = "127.0.0.1:18181"
upstream = "http://127.0.0.1:18080"
data_dir = "$work/data"
http2_conn_stream_rate = 10000000
http2_peer_stream_rate = 0
[admin]
listen = "127.0.0.1:18186"
token = "bench-token-not-for-production"
[peers]
exempt = []
[http_api.limiter.general]
leaky_limit = 1000000000
leaky_tick_reduction = 1000000000
concurrency_limit = 100000
TOML
"$work/limiterd" -config "$work/limiterd.toml" 2>"$work/limiterd.log" & pids+=($!)
for proto in http1 h2c; do
  port=18191 admin=18196
  [ $proto = h2c ] && port=18192 admin=18197
  sed -e "s/18181/$port/; s/18186/$admin/; s/18080/18090/; s|$work/data|$work/data-$proto|" \
    -e "s/^http2_peer_stream_rate = 0$/&\nupstream_protocol = \"$proto\"/" "$work/limiterd.toml" > "$work/limiterd-$proto.toml"
  "$work/limiterd" -config "$work/limiterd-$proto.toml" 2>"$work/limiterd-$proto.log" & pids+=($!)
done

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
  limit_req_zone \$binary_remote_addr zone=perip:64m rate=1000000r/s;
  limit_conn_zone \$binary_remote_addr zone=perconn:64m;
  limit_req_status 429; limit_conn_status 429;
  upstream node { server 127.0.0.1:18080; keepalive 256; }
  server {
    listen 127.0.0.1:18183 http2;
    http2_max_concurrent_streams 128;
    keepalive_requests 100000000;
    location / {
      limit_req zone=perip burst=1000000 nodelay;
      limit_conn perconn 60000;
      proxy_http_version 1.1; proxy_set_header Connection "";
      proxy_pass http://node;
    }
  }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work/nginx" & pids+=($!)

cat > "$work/haproxy.cfg" <<HAP
global
  nbthread 2
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  http-reuse always
frontend fe
  bind 127.0.0.1:18184 proto h2
  stick-table type ip size 1m expire 60s store http_req_rate(30s),conn_cur
  http-request track-sc0 src
  http-request deny deny_status 429 if { sc_http_req_rate(0) gt 1000000000 }
  http-request deny deny_status 429 if { sc_conn_cur(0) gt 100000 }
  default_backend node
backend node
  server node 127.0.0.1:18080
HAP
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 & pids+=($!)

for _ in $(seq 50); do curl -sf http://127.0.0.1:18186/healthz >/dev/null && break; sleep 0.1; done
sleep 0.5

h2run() { # url -> "rps p99_ms non2xx"
  local out log=$work/h2load.log
  rm -f "$log"
  out=$(h2load -c"$conns" -m"$streams" -D "$secs" -t2 --log-file="$log" "$1" 2>&1)
  local rps fail p99
  rps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' <<<"$out")
  fail=$(awk '/status codes:/ {print $5+$7+$9}' <<<"$out")
  p99=$(awk '{print $3}' "$log" | sort -n | awk '{a[NR]=$1} END {printf "%.2f", a[int(NR*0.99)]/1000}')
  printf '%s %s %s\n' "$rps" "$p99" "$fail"
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { echo "scale=2; $1 / $2" | bc; }

echo "== h2c throughput: h2load -c$conns -m$streams -D $secs, $rounds rounds alternated, $(nproc) cores, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
names=(a n p g s)
declare -A url=([a]=http://127.0.0.1:18181/info [n]=http://127.0.0.1:18183/info [p]=http://127.0.0.1:18184/info
  [g]=http://127.0.0.1:18113/info [s]=http://127.0.0.1:18111/info)
declare -A label=([a]="(a) limiterd, h2c, every stream decided" [n]="(n) nginx http2, limit_req+limit_conn"
  [p]="(p) HAProxy proto h2, stick-table rate+conn" [g]="(g) floor: bare Go h2c proxy" [s]="(s) floor: Go h2 server, local answer")
declare -A all allp
for r in $(seq "$rounds"); do
  for n in "${names[@]}"; do
    read -r rps p99 fail < <(h2run "${url[$n]}")
    all[$n]="${all[$n]:-} $rps"
    allp[$n]="${allp[$n]:-} $p99"
    [ "${fail:-0}" != 0 ] && echo "  note: ${label[$n]} round $r: $fail non-2xx"
  done
done
declare -A med
for n in "${names[@]}"; do
  med[$n]=$(echo "${all[$n]}" | median)
  printf '%-44s median %9s req/s  p99 %6s ms   rounds:%s | p99:%s\n' "${label[$n]}" "${med[$n]}" "$(echo "${allp[$n]}" | median)" "${all[$n]}" "${allp[$n]}"
done
best=${med[n]}
[ "$(echo "${med[p]} > $best" | bc)" = 1 ] && best=${med[p]}
echo "(a)/best(n,p) = $(ratio "${med[a]}" "$best")   target >= 0.8"
echo "(a)/(g) = $(ratio "${med[a]}" "${med[g]}")   (limiterd against a bare Go h2c proxy)"
echo "(g)/best(n,p) = $(ratio "${med[g]}" "$best")   (the floor's own reach)"

echo "== the implementation: net/http's HTTP/2 server against x/net/http2's ServeConn, a local answer, $rounds rounds"
x="" s=""
for r in $(seq "$rounds"); do
  read -r a _ _ < <(h2run http://127.0.0.1:18110/info); x="$x $a"
  read -r b _ _ < <(h2run http://127.0.0.1:18111/info); s="$s $b"
done
printf 'x/net ServeConn  median %9s req/s  rounds:%s\n' "$(echo "$x" | median)" "$x"
printf 'net/http         median %9s req/s  rounds:%s\n' "$(echo "$s" | median)" "$s"

echo "== the way to the node: upstream_protocol http1 against h2c, a net/http node speaking both, $rounds rounds"
command -v wrk >/dev/null || echo "(wrk is not installed: HTTP/1.1 clients skipped)"
declare -A up
for r in $(seq "$rounds"); do
  for proto in http1 h2c; do
    port=18191
    [ $proto = h2c ] && port=18192
    read -r a _ _ < <(h2run "http://127.0.0.1:$port/info"); up[h2-$proto]="${up[h2-$proto]:-} $a"
    if command -v wrk >/dev/null; then
      b=$(wrk -t2 -c64 -d"${secs}s" "http://127.0.0.1:$port/info" 2>&1 | awk '/Requests\/sec/ {print $2}')
      up[h1-$proto]="${up[h1-$proto]:-} $b"
    fi
  done
done
for k in h2-http1 h2-h2c h1-http1 h1-h2c; do
  [ -n "${up[$k]:-}" ] && printf '%-10s median %9s req/s  rounds:%s\n' "$k" "$(echo "${up[$k]}" | median)" "${up[$k]}"
done
