#!/usr/bin/env bash
# The data plane on loopback, one run, every proxy in front of the same
# upstream (bench/cmd/benchnode, a fasthttp server answering {"ok":true}):
#   (a) limiterd, default config, 10 000 peers named in X-Forwarded-For by a
#       trusted 127.0.0.1 (bench/xff.lua): every request runs the full
#       decision (peer from the chain, classification, Decide, headers);
#   (b) a bare httputil.ReverseProxy (bench/cmd/bareproxy, stock);
#   (f) a bare fasthttp proxy (bench/cmd/barefast: HostClient.Do on the
#       server's request and response, nothing else);
#   (c) nginx (nginx-light) with limit_req 15r/s burst=450 nodelay and
#       limit_conn 150 per X-Forwarded-For value: general's limits;
#   (d) limiterd answering a flood of rejections from one peer;
#   (h) limiterd as (a) with server.ratelimit_headers = "none": what the
#       rate-limit fields of (a) (the default "both": the IETF pair and
#       the four Arweave 2.9.7 fields) cost, (a)/(h) (target >= 0.95).
# Throughput: wrk -t2 -c$conns, the targets alternated for $rounds rounds
# (the machine's 2 cores are shared by wrk, the proxy and the upstream, and
# by whatever else runs: read the medians and their ratios). Then:
#   - rejections: (d) against (a), and the upstream's request count before
#     and after (d) against the 2xx wrk saw;
#   - latency: bench/cmd/rategen at half of nginx's median rate, against
#     nginx and limiterd in turn: p99 and p99.9;
#   - memory: limiterd's RSS with 10 000 idle keep-alive client connections
#     (bench/cmd/idleconns; once from one peer, once from 10 000), and its
#     peak RSS during a 256 MiB download;
#   - where the time goes: a CPU profile of limiterd's data plane
#     (bench/cmd/profproxy) under (a)'s load, top functions.
# Needs: apt-get install wrk nginx-light (nginx is skipped when missing).
# Usage: bench/proxy.sh [seconds] [connections] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
conns=${2:-64}
rounds=${3:-5}
work=$(mktemp -d)
pids=()
cleanup() {
  if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid" 2>/dev/null)" 2>/dev/null || true; fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }

for c in benchnode bareproxy barefast rategen idleconns profproxy; do go -C bench build -o "$work/$c" ./cmd/$c; done
go build -o "$work/limiterd" ./cmd/limiterd

"$work/benchnode" -listen 127.0.0.1:18080 & pids+=($!)
"$work/bareproxy" -listen 127.0.0.1:18082 -upstream http://127.0.0.1:18080 2>/dev/null & pids+=($!)
"$work/barefast" -listen 127.0.0.1:18087 -upstream 127.0.0.1:18080 & pids+=($!)
limiterd_conf() { # listen admin datadir
  cat <<TOML
[server]
listen = "$1"
upstream = "http://127.0.0.1:18080"
data_dir = "$3"
[admin]
listen = "$2"
token = "bench-token-not-for-production"
[peers]
trusted_proxies = ["127.0.0.1/32"]
forwarded_header = "x-forwarded-for"
TOML
}
limiterd_conf 127.0.0.1:18081 127.0.0.1:18086 "$work/data" > "$work/limiterd.toml"
"$work/limiterd" -config "$work/limiterd.toml" 2>"$work/limiterd.log" & lpid=$!; pids+=($lpid)
limiterd_conf 127.0.0.1:18088 127.0.0.1:18089 "$work/data-h" | sed 's/^\[server\]$/[server]\nratelimit_headers = "none"/' > "$work/limiterd-h.toml"
"$work/limiterd" -config "$work/limiterd-h.toml" 2>"$work/limiterd-h.log" & pids+=($!)

have_nginx=false
if command -v nginx >/dev/null; then
  have_nginx=true
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
for _ in $(seq 50); do curl -sf http://127.0.0.1:18086/healthz >/dev/null && curl -sf http://127.0.0.1:18089/healthz >/dev/null && break; sleep 0.1; done
sleep 0.5

wrkrun() { # url script -> "rps non2xx requests"
  local out
  out=$(wrk -t2 -c"$conns" -d"${secs}s" -s "$2" "$1" 2>&1)
  printf '%s %s %s\n' "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk '/Non-2xx/ {print $5}' <<<"$out" | grep . || echo 0)" "$(awk '/requests in/ {print $1}' <<<"$out")"
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { echo "scale=2; $1 / $2" | bc; }

echo "== throughput: wrk -t2 -c$conns -d${secs}s, $rounds rounds alternated, $(nproc) cores, $(date -u +%FT%TZ)"
declare -A all
names=(a h b f)
$have_nginx && names+=(c)
declare -A url=([a]=http://127.0.0.1:18081/info [b]=http://127.0.0.1:18082/info [f]=http://127.0.0.1:18087/info [c]=http://127.0.0.1:18083/info [h]=http://127.0.0.1:18088/info)
declare -A label=([a]="(a) limiterd, 10k peers admitted" [b]="(b) bare httputil.ReverseProxy" [f]="(f) bare fasthttp proxy" [c]="(c) nginx limit_req+limit_conn" [h]="(h) limiterd, ratelimit_headers none")
for r in $(seq "$rounds"); do
  for n in "${names[@]}"; do
    read -r rps non2xx _ < <(wrkrun "${url[$n]}" bench/xff.lua)
    all[$n]="${all[$n]:-} $rps"
    [ "$non2xx" != 0 ] && echo "  note: ${label[$n]} round $r: $non2xx non-2xx"
  done
done
declare -A med
for n in "${names[@]}"; do
  med[$n]=$(echo "${all[$n]}" | median)
  printf '%-36s median %10s req/s   rounds:%s\n' "${label[$n]}" "${med[$n]}" "${all[$n]}"
done
echo "(a)/(h) = $(ratio "${med[a]}" "${med[h]}")   target >= 0.95 (the rate-limit fields cost at most 5 %)"
echo "(a)/(f) = $(ratio "${med[a]}" "${med[f]}")   target >= 0.9"
echo "(a)/(b) = $(ratio "${med[a]}" "${med[b]}")   target >= 3"
$have_nginx && echo "(a)/(c) = $(ratio "${med[a]}" "${med[c]}")   target >= 0.8"

echo "== rejections: one peer (bench/onepeer.lua) after its 450 tokens"
before=$(curl -s http://127.0.0.1:18080/__count)
read -r rps_d non2xx_d total_d < <(wrkrun http://127.0.0.1:18081/info bench/onepeer.lua)
after=$(curl -s http://127.0.0.1:18080/__count)
printf '%-36s %10s req/s, %s of %s rejected\n' "(d) limiterd, one peer rejected" "$rps_d" "$non2xx_d" "$total_d"
echo "(d)/(a) = $(ratio "$rps_d" "${med[a]}")   target >= 3"
echo "the upstream got $((after - before)) requests during (d); wrk saw $((total_d - non2xx_d)) answered 2xx (at most 450: the peer's bucket)"
# What bounds (d) on this machine: the cheapest answer there is, a static
# one from a fasthttp server (the upstream itself), and nginx's rejections.
read -r rps_z _ _ < <(wrkrun http://127.0.0.1:18080/info bench/onepeer.lua)
printf '%-36s %10s req/s   (d)/(z) = %s\n' "(z) the upstream alone, static answer" "$rps_z" "$(ratio "$rps_d" "$rps_z")"
if $have_nginx; then
  read -r rps_cd non2xx_cd total_cd < <(wrkrun http://127.0.0.1:18083/info bench/onepeer.lua)
  printf '%-36s %10s req/s, %s of %s rejected   (d)/(this) = %s\n' "(c') nginx, one peer rejected" "$rps_cd" "$non2xx_cd" "$total_cd" "$(ratio "$rps_d" "$rps_cd")"
fi

if $have_nginx; then
  half=$(echo "${med[c]} / 2" | bc)
  echo "== latency at half of nginx's median rate: $half req/s for ${secs}s x2 each, 10k peers (bench/cmd/rategen)"
  for r in 1 2; do
    for n in c a; do
      printf '%-36s ' "${label[$n]}"
      "$work/rategen" -url "${url[$n]}" -rate "$half" -duration "${secs}s" -conns "$conns"
    done
  done
fi

rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
echo "== memory: limiterd's RSS (KiB)"
for xff in false true; do
  b=$(rss $lpid)
  "$work/idleconns" -url http://127.0.0.1:18081/info -n 10000 -xff=$xff > "$work/idle.out" 2>&1 & ipid=$!
  for _ in $(seq 120); do grep -q ready "$work/idle.out" && break; sleep 0.5; done
  r0=$(rss $lpid); sleep 10; r10=$(rss $lpid)
  echo "10 000 idle keep-alive connections (a peer each: $xff): before $b, when open $r0, 10 s later $r10: +$(( (r10 - b) / 1024 )) MiB (target <= 64)"
  kill $ipid; wait $ipid 2>/dev/null || true; sleep 2
done
b=$(rss $lpid); peak=$b
curl -s -o /dev/null "http://127.0.0.1:18081/big?size=268435456" & cpid=$!
while kill -0 $cpid 2>/dev/null; do r=$(rss $lpid); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.02; done
echo "256 MiB download: before $b, peak $peak: +$(( (peak - b) / 1024 )) MiB (target <= 32)"

echo "== limiterd's data plane under (a)'s load: CPU profile (bench/cmd/profproxy)"
kill $lpid; wait $lpid 2>/dev/null || true
limiterd_conf 127.0.0.1:18081 127.0.0.1:18086 "$work/data2" > "$work/prof.toml"
"$work/profproxy" -config "$work/prof.toml" -after 1s -for "$((secs - 1))s" -o "$work/cpu.pprof" 2>"$work/prof.log" & ppid=$!; pids+=($ppid)
sleep 0.5
wrk -t2 -c"$conns" -d"${secs}s" -s bench/xff.lua http://127.0.0.1:18081/info >/dev/null
wait $ppid 2>/dev/null || true
go tool pprof -top -nodecount=25 "$work/profproxy" "$work/cpu.pprof" 2>/dev/null | sed -n '1,32p'
go tool pprof -top -cum -nodecount=40 "$work/profproxy" "$work/cpu.pprof" 2>/dev/null |
  grep -E 'limiterd/(proxy|limiter)|flat%' | head -25
