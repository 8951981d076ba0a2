#!/usr/bin/env bash
# Eviction at max_tracked A/B: the working tree ("new") against a git
# revision ("old", from `git archive`, with this tree's bench/evict_test.go
# copied in so both run the same benchmark code), alternated and with the
# order swapped every round (2 shared cores: read the per-round ratios).
#   DecideEvicting:          full table of light entries, a new peer per decision;
#   DecideEvictingStateful:  full table of limited entries, a new light peer per decision.
# Other benchmarks by pattern (as -test.bench takes it) after benchtime,
# e.g. 'BenchmarkDecide$/limiterd/peers=10000/serial' for a decision on a
# tracked peer below the cap.
# Usage: bench/evict.sh REV [rounds] [benchtime] [pattern...]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/evict.sh REV [rounds] [benchtime]}
rounds=${2:-6}
bt=${3:-1s}
shift 3 2>/dev/null || shift $#
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=('^BenchmarkDecideEvicting$' '^BenchmarkDecideEvictingStateful$')
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir "$w/old-src"
git archive "$rev" | tar -x -C "$w/old-src"
cp bench/evict_test.go "$w/old-src/bench/"
if [ -f "$w/old-src/bench/go.mod" ]; then go -C "$w/old-src/bench" test -c -o "$w/old.test" .; else (cd "$w/old-src" && go test -c -o "$w/old.test" ./bench/); fi
go -C bench test -c -o "$w/new.test" .
run() { # binary pattern
  "$1" -test.run XXX -test.bench "$2" -test.benchtime "$bt" -test.benchmem | awk '/^Benchmark/ {print $3, $5, $7; exit}'
}
echo "== new (working tree) against $rev (old), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${patterns[@]}"; do
  ratios=(); olds=(); news=()
  for r in $(seq "$rounds"); do
    if (( r % 2 )); then o=$(run "$w/old.test" $b); n=$(run "$w/new.test" $b)
    else n=$(run "$w/new.test" $b); o=$(run "$w/old.test" $b); fi
    on=${o%% *}; nn=${n%% *}
    q=$(echo "scale=3; $nn / $on" | bc)
    ratios+=("$q"); olds+=("$on"); news+=("$nn")
    echo "$b round $r: old $on ns/op, new $nn ns/op (B/op allocs/op: old ${o#* }, new ${n#* }), new/old $q"
  done
  # On shared cores the fastest round of each is the least disturbed.
  omin=$(printf '%s\n' "${olds[@]}" | sort -g | head -1); nmin=$(printf '%s\n' "${news[@]}" | sort -g | head -1)
  echo "$b median new/old: $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}');" \
    "fastest: old $omin ns/op, new $nmin ns/op, new/old $(echo "scale=3; $nmin / $omin" | bc)"
done
