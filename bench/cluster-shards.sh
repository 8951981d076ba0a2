#!/usr/bin/env bash
# Cluster mode on a Redis Cluster of three masters created with
# redis-cli --cluster create (docs/benchmarks.md): decisions per second and
# the Redis time per decision, summed and per shard, strict and local_first.
#   bench/cluster-shards.sh [clusterbench flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
ports=(${PORTS:-7101 7102 7103})
addrs=()
for p in "${ports[@]}"; do
  mkdir -p "$dir/$p"
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --dir "$dir/$p" \
    --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log"
  addrs+=("127.0.0.1:$p")
done
trap 'for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done; rm -rf "$dir"' EXIT
for p in "${ports[@]}"; do for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done; done
redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 100); do redis-cli -p "${ports[0]}" cluster info | grep -q cluster_state:ok && break; sleep 0.1; done
go -C bench build -o "$dir/clusterbench" ./cmd/clusterbench
echo "== redis-server $(redis-server --version | grep -o 'v=[0-9.]*'), 3 masters, $(nproc) cores, $(date -u +%FT%TZ)"
"$dir/clusterbench" -addr "${addrs[0]}" -cluster "$(IFS=,; echo "${addrs[*]}")" -only strict,strict_gcra,local_first "$@"
