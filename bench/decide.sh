#!/usr/bin/env bash
# The core's decision against the x/time/rate keyed baseline, in one
# binary, alternated round by round (2 shared cores: read the per-round
# ratios and the fastest of each): BenchmarkDecide's serial case at
# 10 000 peers (peers in the order they were first seen) and
# BenchmarkDecideRandomOrder's (peers in a random order).
#   bench/decide.sh [rounds] [benchtime]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
bt=${2:-2000000x}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
go -C bench test -c -o "$w/bench.test" .
run() { # pattern
  (cd bench && "$w/bench.test" -test.run '^$' -test.bench "$1" -test.benchtime "$bt" -test.count 1 -test.cpu 1 -test.benchmem) |
    awk '/^Benchmark/ {print $3; exit}'
}
echo "== $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg), benchtime $bt"
for bench in 'BenchmarkDecide$' 'BenchmarkDecideRandomOrder$'; do
  ls=(); xs=(); rs=()
  for r in $(seq "$rounds"); do
    a="$bench/limiterd/peers=10000/serial\$"; b="$bench/x-time-rate/peers=10000/serial\$"
    if (( r % 2 )); then l=$(run "$a"); x=$(run "$b"); else x=$(run "$b"); l=$(run "$a"); fi
    q=$(echo "scale=3; $l / $x" | bc)
    ls+=("$l"); xs+=("$x"); rs+=("$q")
    echo "${bench%\$} round $r: limiterd $l ns/op, x/time/rate $x ns/op, ratio $q"
  done
  lmin=$(printf '%s\n' "${ls[@]}" | sort -g | head -1); xmin=$(printf '%s\n' "${xs[@]}" | sort -g | head -1)
  med=$(printf '%s\n' "${rs[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  echo "${bench%\$}: median ratio $med; fastest limiterd $lmin ns/op, x/time/rate $xmin ns/op, ratio $(echo "scale=3; $lmin / $xmin" | bc)"
done
