#!/usr/bin/env bash
# Runs every `go test -fuzz` target of the module for a while each
# (docs/reliability.md, "Fuzzing"). CI runs it short, before the test
# suite; run it long by hand:
#
#   internal/chaos/fuzz.sh            # 5s per target (CI)
#   internal/chaos/fuzz.sh 60s        # a minute per target
#   internal/chaos/fuzz.sh 10m Config # only the targets whose name matches Config
#   FUZZ_SKIP='^FuzzAdminAPI$' internal/chaos/fuzz.sh 2s   # all but those (.ci/run)
#
# A target that fails leaves its input under the package's
# testdata/fuzz/FuzzXxx/ (commit it as a regression input once fixed);
# the script goes on with the others and exits 1 at the end.
#
# Go 1.26's fuzz coordinator can fail a run that found nothing with a bare
# "context deadline exceeded" as -fuzztime ends (go.dev/issue/75804, fixed
# in Go 1.27): a run that fails with that alone, writing no input and
# failing no seed, is reported as a flake, not a failure.
set -uo pipefail
cd "$(dirname "$0")/../.."

fuzztime=${1:-5s}
match=${2:-.}
# New inputs are minimized for at most this long (Go's default is 60s,
# which can eat a short run whole).
minimize=${FUZZ_MINIMIZE:-2s}

targets=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(' . |
  sed -E 's|^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\(.*|\1 \2|' | sort -u | grep -E " .*${match}" || true)
if [ -n "${FUZZ_SKIP:-}" ]; then
  targets=$(grep -vE " ${FUZZ_SKIP#^}" <<<"$targets" || true)
fi
if [ -z "$targets" ]; then
  echo "fuzz: no target matches $match" >&2
  exit 1
fi

failed=()
start=$(date +%s)
while read -r pkg name; do
  t0=$(date +%s)
  out=$(go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" -fuzzminimizetime="$minimize" "./$pkg" 2>&1)
  rc=$?
  execs=$(printf '%s\n' "$out" | grep -oE 'execs: [0-9]+' | tail -1 | cut -d' ' -f2)
  verdict=ok
  if [ $rc != 0 ]; then
    verdict=FAIL
    if grep -q '^    context deadline exceeded$' <<<"$out" && ! grep -qE "Failing input written|--- FAIL: ${name}/|panic:" <<<"$out"; then
      verdict="flake (go.dev/issue/75804)"
      rc=0
    fi
  fi
  printf 'fuzz: %-28s %-16s %4ss %10s execs  %s\n' "$name" "$pkg" "$(($(date +%s) - t0))" "${execs:-?}" "$verdict"
  if [ $rc != 0 ]; then
    printf '%s\n' "$out" | grep -v '^fuzz: elapsed' >&2
    failed+=("$pkg $name")
  fi
done <<<"$targets"
echo "fuzz: $(wc -l <<<"$targets") targets, ${fuzztime} each, $(($(date +%s) - start))s in all"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'fuzz: FAILED: %s\n' "${failed[@]}" >&2
  exit 1
fi
