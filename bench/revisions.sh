#!/usr/bin/env bash
# The public listener of two builds of limiterd A/B on loopback: the
# working tree ("new") against a git revision ("old", built from
# `git archive`), in front of the same upstream (bench/cmd/benchnode), the
# same config (proxy.sh's (a): default limits, 10 000 peers named in
# X-Forwarded-For by a trusted 127.0.0.1), alternated and with the order
# swapped every round (2 shared cores: read the per-round ratios):
#   admitted: bench/xff.lua, every request decided and proxied;
#   rejected: bench/onepeer.lua, one peer past its 450 tokens, every
#   answer a 429.
# Each figure is req/s and, in brackets, the build's CPU time per request
# (user + system, µs, from /proc): on a machine others share, the CPU a
# request costs moves less than the rate it gets.
# Needs: apt-get install wrk. Usage: bench/revisions.sh REV [rounds] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/revisions.sh REV [rounds] [seconds]}
rounds=${2:-6}
secs=${3:-5}
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)"; exit 1; }
w=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$w"
}
trap cleanup EXIT

mkdir "$w/old-src"
git archive "$rev" | tar -x -C "$w/old-src"
(cd "$w/old-src" && go build -o "$w/limiterd-old" ./cmd/limiterd)
go build -o "$w/limiterd-new" ./cmd/limiterd
go -C bench build -o "$w/benchnode" ./cmd/benchnode

conf() { # listen admin datadir
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
"$w/benchnode" -listen 127.0.0.1:18080 & pids+=($!)
conf 127.0.0.1:18081 127.0.0.1:18086 "$w/data-new" > "$w/new.toml"
conf 127.0.0.1:18091 127.0.0.1:18096 "$w/data-old" > "$w/old.toml"
"$w/limiterd-new" -config "$w/new.toml" 2>"$w/new.log" & pids+=($!)
declare -A pid=([new]=$!)
"$w/limiterd-old" -config "$w/old.toml" 2>"$w/old.log" & pids+=($!)
pid[old]=$!
for p in 18086 18096; do
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$p/healthz" >/dev/null && break; sleep 0.1; done
done
sleep 0.5

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rps() { # url script pid -> "rps[µs]"
  local t0 out t1
  t0=$(ticks "$3")
  out=$(wrk -t2 -c64 -d"${secs}s" -s "$2" "$1" 2>&1)
  t1=$(ticks "$3")
  printf '%s[%s]\n' "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" \
    "$(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" '/requests in/ {printf "%.1f", t * 1e6 / hz / $1}' <<<"$out")"
}
num() { echo "${1%%[*}"; }
cpu() { local v=${1#*[}; echo "${v%]}"; }
ratio() { echo "scale=3; $1 / $2" | bc; }
echo "== the working tree (new) against $rev (old), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  declare -A got=()
  order=(new old)
  [ $((r % 2)) = 0 ] && order=(old new)
  for script in xff onepeer; do
    for b in "${order[@]}"; do
      port=18081
      [ "$b" = old ] && port=18091
      got[$b-$script]=$(rps "http://127.0.0.1:$port/info" "bench/$script.lua" "${pid[$b]}")
    done
  done
  echo "round $r (${order[0]} first): admitted new ${got[new-xff]} old ${got[old-xff]} new/old $(ratio "$(num "${got[new-xff]}")" "$(num "${got[old-xff]}")")" \
    "cpu $(ratio "$(cpu "${got[new-xff]}")" "$(cpu "${got[old-xff]}")")" \
    "| rejected new ${got[new-onepeer]} old ${got[old-onepeer]} new/old $(ratio "$(num "${got[new-onepeer]}")" "$(num "${got[old-onepeer]}")")" \
    "cpu $(ratio "$(cpu "${got[new-onepeer]}")" "$(cpu "${got[old-onepeer]}")")"
done
