#!/usr/bin/env bash
# The other algorithms (docs/limiting.md, "Other algorithms") against the hybrid
# and their nearest Go baselines, one run, 10 000 peers each asking twice its
# limit (450 per 30 s) in the steady state after one period:
#   1. BenchmarkDecideRatio: each algorithm and the hybrid in alternating
#      blocks of 16 384 Decide+Release (about 2 ms each), ROUNDS times;
#      prints per algorithm its time ÷ the hybrid's, min / median / max over
#      the rounds. Target: ≤ 1.10, 0 allocs/op.
#   2. BenchmarkDecideAlgorithms: ns/op of every algorithm serially and
#      from every core, each beside its baseline (x/time/rate keyed map for
#      token_bucket and gcra, a plain mutex-guarded map of the same
#      algorithm for the others), -count 3.
# Usage: bench/algorithms.sh [rounds] [blocks per round]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
blocks=${2:-1000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go -C bench test -run XXX -bench 'DecideRatio' -benchtime "${blocks}x" -count "$rounds" . | tee "$out"
awk '
/^BenchmarkDecideRatio\// {
	name = $1; sub(/^BenchmarkDecideRatio\//, "", name); sub(/-[0-9]+$/, "", name)
	for (i = 1; i <= NF; i++) if ($(i + 1) == "x-hybrid") { n[name]++; v[name, n[name]] = $i }
}
END {
	printf "\n%-16s %s\n", "algorithm", "time ÷ hybrid: min / median / max"
	for (a in n) {
		m = n[a]; delete s
		for (i = 1; i <= m; i++) s[i] = v[a, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
		printf "%-16s %.2f / %.2f / %.2f\n", a, s[1], s[int((m + 1) / 2)], s[m]
	}
}' "$out"
go -C bench test -run XXX -bench 'DecideAlgorithms' -benchtime 1s -count 3 .
