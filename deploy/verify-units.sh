#!/usr/bin/env bash
# Verify limiterd's systemd units before installing them: a copy of
# deploy/limiterd.service whose ExecStart runs BINARY (the limiterd you
# built; the unit names /usr/bin/limiterd, where the package installs
# it), and deploy/limiterd.socket, through `systemd-analyze verify`. Prints
# nothing and exits 0 when both are sound; a warning (systemd-analyze
# exits 0 on those, an unknown key among them) fails it.
# Usage: deploy/verify-units.sh [BINARY]   (default: limiterd on the PATH)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$(command -v limiterd || true)}
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 BINARY (a built limiterd: go build -o limiterd ./cmd/limiterd)" >&2
  exit 2
fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s|^ExecStart=/usr/bin/limiterd |ExecStart=$bin |" "$here/limiterd.service" > "$work/limiterd.service"
cp "$here/limiterd.socket" "$work/limiterd.socket"
cd "$work"
status=0
out=$(systemd-analyze verify "$work/limiterd.socket" "$work/limiterd.service" 2>&1) || status=$?
if [ -n "$out" ]; then
  echo "$out" | sed "s|$work/|deploy/|g" >&2
  [ "$status" != 0 ] || status=1
fi
exit $status
