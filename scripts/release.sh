#!/usr/bin/env bash
# release.sh — QuantyKube's release of the checked-out commit, offline and reproducible, into dist/.
#
#   scripts/release.sh [--out DIR] [--allow-dirty]
#
# Writes into DIR (default dist/, git-ignored), replacing what was there under these names:
#   quantykube          the binary: CGO_ENABLED=0 (static), -trimpath, -buildvcs=false, with
#                       internal/version's Version and Commit stamped by -ldflags -X
#   quantykube.oci.tar  its image (scripts/image.sh: that binary and etcd's etcdutl) as a tar of an OCI image
#                       layout, tagged ghcr.io/quantyroot/quantykube:<version> and :<version>-<commit>
#   quantykube.yaml     the operator's manifest (scripts/generate.sh render) naming that image pinned by digest,
#                       ghcr.io/quantyroot/quantykube:<version>-<commit>@sha256:<the manifest's digest>
#   SHA256SUMS          `sha256sum` of the three
# and prints the pinned reference on stdout (progress on stderr). <version> is internal/version.Version,
# <commit> the first 12 hex digits of HEAD.
#
# A tree with changes not committed (tracked files, or untracked ones git does not ignore) is refused,
# so a release is its commit. --allow-dirty builds it anyway, marked: the commit is <12 hex>-dirty and
# the image is tagged :<version>-<commit>-dirty only, never :<version> (the kubeadm harness's e2e uses it,
# to install the tree it tests exactly as a release is installed).
#
# Reproducible: two runs from clean clones of one commit, in any directories, write byte-identical files
# (test/release checks it). SOURCE_DATE_EPOCH is the commit's time (git log -1 --format=%ct): the image's
# created time and the date of every tar entry; entries are sorted, owned 0:0 with fixed modes; the layer's
# gzip header has no name and no time; the archive itself is not compressed. The build's environment is
# fixed here (GOFLAGS, GOOS, CGO_ENABLED); the Go toolchain is go.mod's.
# Needs: git, Go, the Go module proxy or Go's module cache, scripts/deps.sh's etcdutl (cached, or built
# from the module proxy). No Docker, no registry, no other network.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
die() { printf 'release.sh: %s\n' "$*" >&2; exit 1; }
usage="usage: scripts/release.sh [--out DIR] [--allow-dirty]"

out=$ROOT/dist dirty_ok=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) [[ -n ${2:-} ]] || die "--out needs a directory, e.g. --out /tmp/dist"; out=$2; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --allow-dirty) dirty_ok=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1'; $usage" ;;
  esac
done
t0=$SECONDS

cd "$ROOT"
head=$(git rev-parse --verify -q HEAD 2>/dev/null) ||
  die "$ROOT is not a git checkout with a commit: release from a clone (git clone https://github.com/quantyroot/quantykube)"
commit=${head:0:12}
changed=$(git status --porcelain --untracked-files=normal)
if [[ -n $changed ]]; then
  first=$(head -n 1 <<<"$changed")
  ((dirty_ok)) || die "the tree has changes not committed ($(wc -l <<<"$changed") paths, first: ${first:3}): commit or stash them (git stash -u), or pass --allow-dirty for a build marked -dirty"
  commit+=-dirty
fi
version=$(sed -n 's/^var Version = "\(v[0-9][^"]*\)"$/\1/p' internal/version/version.go)
[[ -n $version ]] || die "no \`var Version = \"vX.Y.Z\"\` line in internal/version/version.go"
image=$(sed -n 's/^const Image = "\([^"]*\)"$/\1/p' internal/version/version.go)
[[ -n $image ]] || die "no \`const Image = \"...\"\` line in internal/version/version.go"
tags=("$image:$version-$commit")
[[ $commit == *-dirty ]] || tags=("$image:$version" "${tags[@]}")
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH

mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "$out/.release.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The build's environment, whatever the caller's: nothing but go.mod and these flags shapes the binary.
unset GOFLAGS GOEXPERIMENT GOAMD64 QK_VERSION
export GOFLAGS=-mod=readonly GOOS=linux CGO_ENABLED=0
pkg=github.com/quantyroot/quantykube/internal/version
printf 'release.sh: %s, commit %s: building the binary\n' "$version" "$commit" >&2
go build -trimpath -buildvcs=false -ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit" \
  -o "$tmp/quantykube" ./cmd/quantykube || die "go build ./cmd/quantykube failed (see above)"

tag_args=()
for t in "${tags[@]}"; do tag_args+=(--tag "$t"); done
scripts/image.sh "${tag_args[@]}" --bin "$tmp/quantykube" --digest-file "$tmp/digest" "$tmp/quantykube.oci.tar" >/dev/null ||
  die "scripts/image.sh failed (see above)"
digest=$(cat "$tmp/digest")
[[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || die "scripts/image.sh wrote the digest '$digest', not sha256:<64 hex>"
pinned=$image:$version-$commit@$digest

{
  echo "# QuantyKube $version, commit $commit: written by scripts/release.sh, the image pinned by digest. Do not edit."
  scripts/generate.sh render "$pinned"
} >"$tmp/quantykube.yaml" || die "scripts/generate.sh render failed (see above)"
(cd "$tmp" && sha256sum quantykube quantykube.oci.tar quantykube.yaml >SHA256SUMS) || die "sha256sum failed"

for f in quantykube quantykube.oci.tar quantykube.yaml SHA256SUMS; do
  mv -f "$tmp/$f" "$out/$f" || die "move $f into $out failed"
done
printf 'release.sh: %s in %ds: quantykube, quantykube.oci.tar (%s), quantykube.yaml, SHA256SUMS\n' \
  "$out" "$((SECONDS - t0))" "$(du -h "$out/quantykube.oci.tar" | cut -f1)" >&2
echo "$pinned"
