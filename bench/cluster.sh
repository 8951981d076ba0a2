#!/usr/bin/env bash
# Cluster mode against go-redis/redis_rate on one local redis-server
# (docs/benchmarks.md): throughput at 64 callers, commands and round trips
# per decision, then a SIGSTOP of Redis under load.
#   bench/cluster.sh [clusterbench flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
port=${PORT:-6391}
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir"
trap 'kill -CONT $(cat "$dir/redis.pid") 2>/dev/null; redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
go -C bench build -o "$dir/clusterbench" ./cmd/clusterbench
echo "== redis-server $(redis-server --version | grep -o 'v=[0-9.]*'), $(nproc) cores, $(date -u +%FT%TZ)"
"$dir/clusterbench" -addr "127.0.0.1:$port" "$@"
echo
"$dir/clusterbench" -addr "127.0.0.1:$port" -pid "$(cat "$dir/redis.pid")" -stall "$@"
