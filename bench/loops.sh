#!/usr/bin/env bash
# What an idle daemon costs at a given snapshot.interval: a build of a git
# revision ("old", from `git archive`; it accepts any interval > 0) and the
# working tree ("new"), each started idle (no traffic, empty table) with
# the interval given, its CPU time read from /proc over a few seconds.
# The working tree refuses intervals below its minimum (exit 2, the
# message printed). Usage: bench/loops.sh REV [seconds] [interval...]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bench/loops.sh REV [seconds] [interval...]}
secs=${2:-10}
shift 2 || true
intervals=("${@:-1ns 1ms 100ms 1s 5s}")
read -r -a intervals <<< "${intervals[*]}"
w=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$w"; }
trap cleanup EXIT
mkdir "$w/old-src"
git archive "$rev" | tar -x -C "$w/old-src"
(cd "$w/old-src" && go build -o "$w/limiterd-old" ./cmd/limiterd)
go build -o "$w/limiterd-new" ./cmd/limiterd
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "== idle CPU by snapshot.interval, $secs s each, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
for iv in "${intervals[@]}"; do
  for b in old new; do
    rm -rf "$w/data"
    cat > "$w/c.toml" <<TOML
[server]
listen = "127.0.0.1:0"
upstream = "http://127.0.0.1:9"
data_dir = "$w/data"
[admin]
listen = "127.0.0.1:0"
token = "bench-token-not-for-production"
[snapshot]
interval = "$iv"
TOML
    "$w/limiterd-$b" -config "$w/c.toml" 2>"$w/err" & pid=$!
    sleep 1
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" && rc=0 || rc=$?
      echo "interval $iv $b: refused (exit $rc): $(grep -m1 snapshot.interval "$w/err" || head -c 200 "$w/err")"
      pid=; continue
    fi
    c0=$(cpu "$pid"); sleep "$secs"; c1=$(cpu "$pid")
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    echo "interval $iv $b: $(echo "scale=3; ($c1 - $c0) / $hz / $secs" | bc) of a core"
  done
done
