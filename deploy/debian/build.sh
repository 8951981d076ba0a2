#!/usr/bin/env bash
# Build limiterd's Debian package with dpkg-deb, from this checkout and
# the Go module cache only (no network: GOPROXY=off; `go mod download`
# first on a fresh machine). Prints the path of the .deb.
#
#   deploy/debian/build.sh [-o DIR] [-v VERSION]
#
# VERSION (X.Y.Z, a leading v allowed) defaults to the release tag vX.Y.Z
# at HEAD; after a tag, X.Y.Z+git<N>.<commit> (N commits past vX.Y.Z);
# before any tag, the newest release of CHANGELOG.md as X.Y.Z~git<date>.<commit>,
# which sorts before X.Y.Z (decision 198). A checkout with uncommitted
# changes adds ".dirty". `limiterd version` prints the same, with a v.
# The architecture is Go's GOARCH (the host's unless set), named as dpkg
# names it. docs/operations.md ("The Debian package") says what it holds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$PWD
version=
while getopts "o:v:" opt; do
  case $opt in
    o) out=$OPTARG ;;
    v) version=${OPTARG#v} ;;
    *) echo "usage: $0 [-o DIR] [-v VERSION]" >&2; exit 2 ;;
  esac
done
cd "$root"

git_ok() { git rev-parse --is-inside-work-tree >/dev/null 2>&1; }
if [ -z "$version" ]; then
  release='v[0-9]*.[0-9]*.[0-9]*'
  if git_ok && tag=$(git describe --tags --exact-match --match "$release" 2>/dev/null); then
    version=${tag#v}
  elif git_ok && desc=$(git describe --tags --long --match "$release" 2>/dev/null); then
    # vX.Y.Z-N-gHASH
    n=${desc%-g*}; n=${n##*-}
    version="${desc%%-*}"; version="${version#v}+git${n}.$(git rev-parse --short=12 HEAD)"
  else
    next=$(sed -nE 's/^## \[([0-9]+\.[0-9]+\.[0-9]+)\].*/\1/p' CHANGELOG.md | head -1)
    if [ -z "$next" ]; then
      echo "build.sh: no release in CHANGELOG.md and no tag: give -v VERSION" >&2
      exit 2
    fi
    if git_ok; then
      version="${next}~git$(TZ=UTC git log -1 --date=format-local:%Y%m%d --format=%cd).$(git rev-parse --short=12 HEAD)"
    else
      version="${next}~dev"
    fi
  fi
  if git_ok && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    version="${version}.dirty"
  fi
fi
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+([~+][A-Za-z0-9.+~]*)?$ ]]; then
  echo "build.sh: version $version is not X.Y.Z[~+…]" >&2
  exit 2
fi

goarch=${GOARCH:-$(go env GOARCH)}
case $goarch in
  amd64 | arm64 | riscv64 | s390x | ppc64le) arch=${goarch/ppc64le/ppc64el} ;;
  386) arch=i386 ;;
  arm) arch=armhf ;;
  *) echo "build.sh: no Debian architecture for GOARCH=$goarch" >&2; exit 2 ;;
esac

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# The build time is the commit's (reproducible), or SOURCE_DATE_EPOCH's.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
built=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg=$work/limiterd
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/lib/systemd/system" "$pkg/usr/lib/sysusers.d" \
  "$pkg/etc/limiterd" "$pkg/usr/share/doc/limiterd/docs" "$pkg/usr/share/limiterd/grafana" "$pkg/usr/share/limiterd/prometheus"

CGO_ENABLED=0 GOARCH=$goarch GOPROXY=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
  go build -trimpath -ldflags "-s -w -X main.Version=v$version -X main.Revision=$revision -X main.BuildTime=$built" \
  -o "$pkg/usr/bin/limiterd" ./cmd/limiterd

install -m 0644 deploy/limiterd.service deploy/limiterd.socket "$pkg/usr/lib/systemd/system/"
install -m 0644 deploy/limiterd.sysusers "$pkg/usr/lib/sysusers.d/limiterd.conf"
install -m 0644 config.toml "$pkg/etc/limiterd/config.toml"
install -m 0644 deploy/debian/copyright README.md "$pkg/usr/share/doc/limiterd/"
install -m 0644 docs/*.md "$pkg/usr/share/doc/limiterd/docs/"
gzip -9n < CHANGELOG.md > "$pkg/usr/share/doc/limiterd/changelog.gz"
chmod 0644 "$pkg/usr/share/doc/limiterd/changelog.gz"
install -m 0644 deploy/grafana/*.json "$pkg/usr/share/limiterd/grafana/"
install -m 0644 deploy/prometheus/*.yml "$pkg/usr/share/limiterd/prometheus/"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$pkg/DEBIAN/"
echo /etc/limiterd/config.toml > "$pkg/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" deploy/debian/control > "$pkg/DEBIAN/control"
(cd "$pkg" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"
find "$pkg" -type d -exec chmod 0755 {} +
# Reproducible: every file dated as the commit.
find "$pkg" -exec touch -h -d "@$epoch" {} +
export SOURCE_DATE_EPOCH=$epoch

mkdir -p "$out"
deb=$out/limiterd_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zgzip --build "$pkg" "$deb" >/dev/null
echo "$deb"
