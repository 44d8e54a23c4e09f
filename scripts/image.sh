#!/usr/bin/env bash
# image.sh — build QuantyKube's release image from the working tree, offline, as an OCI archive.
#
#   scripts/image.sh [--tag REF]... [--bin FILE] [--digest-file FILE] [OUT]
#
# OUT defaults to .cache/image/quantykube-<version>.tar; REF to ghcr.io/quantyroot/quantykube:<version>,
# <version> being internal/version.Version (or QK_VERSION, which is then also compiled in with -ldflags -X,
# so `quantykube version` in the image always says its tag). Prints OUT on stdout; progress on stderr.
# --tag may be given more than once (the image gets every tag); --bin puts FILE in the image as
# /usr/local/bin/quantykube instead of building it (scripts/release.sh: the binary it ships beside the
# image, stamped with the commit); --digest-file FILE receives the image's manifest digest (sha256:...).
# SOURCE_DATE_EPOCH, when set, dates the image and its entries (scripts/mkimage).
#
# The image: one layer (scripts/mkimage) with /usr/local/bin/quantykube (CGO_ENABLED=0, -trimpath, so
# it needs no libc), /usr/local/bin/etcdutl (etcd's, of the etcd version kubeadm's clusters run, static,
# built by scripts/deps.sh: the operator puts it on the control planes for the HA undo, ADR 202), a
# minimal /etc/passwd and /etc/group, entrypoint /usr/local/bin/quantykube, linux/amd64.
# Equal trees give byte-equal archives (entries dated at epoch, sorted), so callers may cache by content.
# Load it with `ctr -n k8s.io images import OUT` (named by io.containerd.image.name), or serve it with
# the kubeadm harness's registry; `skopeo copy oci-archive:OUT docker://...` publishes it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
die() { printf 'image.sh: %s\n' "$*" >&2; exit 1; }

tags=() out="" bin="" digest_file=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --tag) [[ -n ${2:-} ]] || die "--tag needs an image reference, e.g. --tag ghcr.io/quantyroot/quantykube:v0.1.0"; tags+=("$2"); shift 2 ;;
    --tag=*) tags+=("${1#*=}"); shift ;;
    --bin) [[ -n ${2:-} && -f $2 ]] || die "--bin needs a built quantykube binary, e.g. --bin dist/quantykube"; bin=$2; shift 2 ;;
    --digest-file) [[ -n ${2:-} ]] || die "--digest-file needs a file to write the digest to"; digest_file=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option '$1'; usage: scripts/image.sh [--tag REF]... [--bin FILE] [--digest-file FILE] [OUT]" ;;
    *) [[ -z $out ]] || die "one OUT only (got '$out' and '$1')"; out=$1; shift ;;
  esac
done

version=$(sed -n 's/^var Version = "\(v[0-9][^"]*\)"$/\1/p' "$ROOT/internal/version/version.go")
[[ -n $version ]] || die "no \`var Version = \"vX.Y.Z\"\` line in internal/version/version.go"
ldflags="-s -w"
if [[ -n ${QK_VERSION:-} ]]; then
  [[ $QK_VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "QK_VERSION=$QK_VERSION: want vMAJOR.MINOR.PATCH[-PRE], e.g. v0.1.1"
  version=$QK_VERSION
  ldflags+=" -X github.com/quantyroot/quantykube/internal/version.Version=$version"
fi
((${#tags[@]})) || tags=("ghcr.io/quantyroot/quantykube:$version")
out=${out:-$ROOT/.cache/image/quantykube-$version.tar}
mkdir -p "$(dirname "$out")"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qk-image.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [[ -n $bin ]]; then
  cp "$bin" "$tmp/quantykube" || die "copy $bin failed"
else
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/quantykube" ./cmd/quantykube) ||
    die "go build ./cmd/quantykube failed (see above)"
fi
# -trimpath: the same compiled packages whatever directory the clone is in (Go's cache then reuses them)
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$tmp/mkimage" ./scripts/mkimage) || die "go build ./scripts/mkimage failed (see above)"
etcdutl=$("$ROOT/scripts/deps.sh" path etcdutl) ||
  die "scripts/deps.sh path etcdutl failed (see above): the image carries etcd's etcdutl for the HA undo"
tag_args=()
for t in "${tags[@]}"; do tag_args+=(-tag "$t"); done
"$tmp/mkimage" -format oci -out "$out" "${tag_args[@]}" ${digest_file:+-digest-file "$digest_file"} -entrypoint /usr/local/bin/quantykube \
  -add "$tmp/quantykube:/usr/local/bin/quantykube" -add "$etcdutl:/usr/local/bin/etcdutl" 2>"$tmp/mkimage.log" ||
  die "mkimage failed: $(cat "$tmp/mkimage.log")"
printf 'image.sh: %s (%s, OCI archive, %s)\n' "${tags[*]}" "$out" "$(du -h "$out" | cut -f1)" >&2
echo "$out"
