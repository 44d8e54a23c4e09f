#!/usr/bin/env bash
# deps.sh — build real upstream components (Kubernetes, etcd, kine, CRI tools,
# runc, CNI plugins) from the Go module proxy and cache them by version.
#
#   scripts/deps.sh path NAME...   build any missing NAME, print one absolute path per line, in order
#   scripts/deps.sh env NAME...    same, printed as `export QK_<NAME>=/abs/path` (dashes become underscores)
#   scripts/deps.sh list           names and versions (and whether each is cached)
#   scripts/deps.sh verify         hash every cached entry against its stamp; remove (and name) those
#                                  that differ, so the next path/env builds them again
#   scripts/deps.sh regen WRAPPER  maintainers only: rewrite scripts/deps/WRAPPER/go.{mod,sum} from the
#                                  versions below (after a version bump), then commit them
#
# Invariants:
# - Cache: ${QK_CACHE:-~/.cache/quantykube}/deps/<group>-<version>/<name>, outside the clone, so a
#   fresh clone on the same machine finds it (as Go keeps its build cache in the home directory).
#   Builds go to a temporary directory beside it and are moved into place (rename); then its stamp,
#   <name>.sha256 (sha256sum's format: a hash per file), is written the same way. An entry counts as
#   cached only with its stamp: a build killed between the two renames is built again. `verify`
#   hashes every entry against its stamp and removes the ones that differ (scripts/test.sh runs it
#   first), so a corrupt binary is rebuilt, never used.
# - Wrapper modules are COMMITTED under scripts/deps/<group>/ (go.mod, go.sum, tools.go) so every build
#   resolves the same module graph; they are built with -mod=readonly and never modified by a build.
#   Components without replace directives (kine, runc, CNI plugins) use `go install pkg@version`, which
#   is pinned by the module's own go.sum and the checksum database.
# - One build at a time per cache (flock on <cache>/deps/.lock): a second caller waits, then finds the
#   binary cached. Cached lookups take no lock.
# - Only stdout carries paths/exports; progress and errors go to stderr.
# - apt prerequisites (gcc, libseccomp-dev, pkg-config) are installed non-interactively when a
#   requested component needs them and they are missing.
set -euo pipefail

KUBE_VERSION=v1.36.3     # kube-apiserver kube-controller-manager kube-scheduler kubelet kubeadm kube-proxy
KUBE_STAGING_VERSION=v0.36.3
ETCD_VERSION=v3.6.16     # etcd etcdctl etcdutl
ETCD_BENCH_VERSION=v3.6.8 # etcd-benchmark (newest go.etcd.io/etcd/v3 root module served)
KINE_VERSION=v0.17.5
CRI_TOOLS_VERSION=v1.37.0 # crictl critest
RUNC_VERSION=v1.5.3
CNI_VERSION=v1.10.0      # cni-plugins: bridge host-local portmap loopback (a directory)
COREDNS_VERSION=v1.14.2  # coredns: kubeadm v1.36.3's CoreDNSVersion, only its default Corefile's plugins

ALL_NAMES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubeadm kube-proxy
  etcd etcdctl etcdutl etcd-benchmark kine crictl critest runc cni-plugins coredns)

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WRAPPERS=$REPO_ROOT/scripts/deps

log() { printf '[deps %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'deps.sh: %s\n' "$*" >&2; exit 1; }

find_go() {
  if command -v go >/dev/null 2>&1; then GO=$(command -v go)
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found; install Go 1.26 at /usr/local/go or put go on PATH"; fi
}

# group_of NAME -> group key; version_of GROUP -> version.
group_of() {
  case $1 in
    kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubeadm|kube-proxy) echo kubernetes ;;
    etcd|etcdctl|etcdutl) echo etcd ;;
    etcd-benchmark) echo etcd-benchmark ;;
    kine) echo kine ;;
    crictl|critest) echo cri-tools ;;
    runc) echo runc ;;
    cni-plugins) echo cni-plugins ;;
    coredns) echo coredns ;;
    *) return 1 ;;
  esac
}
version_of() {
  case $1 in
    kubernetes) echo "$KUBE_VERSION" ;;
    etcd) echo "$ETCD_VERSION" ;;
    etcd-benchmark) echo "$ETCD_BENCH_VERSION" ;;
    kine) echo "$KINE_VERSION" ;;
    cri-tools) echo "$CRI_TOOLS_VERSION" ;;
    runc) echo "$RUNC_VERSION" ;;
    cni-plugins) echo "$CNI_VERSION" ;;
    coredns) echo "$COREDNS_VERSION" ;;
  esac
}

setup_cache() {
  CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
  mkdir -p "$CACHE/deps"
  CACHE=$(cd "$CACHE" && pwd)
  DEPS=$CACHE/deps
}

# path_of NAME: where NAME lives in the cache (cni-plugins is a directory).
path_of() {
  local g; g=$(group_of "$1")
  echo "$DEPS/$g-$(version_of "$g")/$1"
}
is_cached() {
  local p; p=$(path_of "$1")
  [[ -s $p.sha256 ]] || return 1
  if [[ $1 == cni-plugins ]]; then [[ -x $p/bridge && -x $p/host-local && -x $p/portmap && -x $p/loopback ]]
  else [[ -f $p && -x $p ]]; fi
}

# stamp NAME: record the hash of NAME's cached file(s) (after it was moved into place).
stamp() {
  local p; p=$(path_of "$1")
  if [[ $1 == cni-plugins ]]; then (cd "$(dirname "$p")" && sha256sum cni-plugins/*) >"$p.sha256.tmp"
  else (cd "$(dirname "$p")" && sha256sum "$1") >"$p.sha256.tmp"; fi
  mv -f "$p.sha256.tmp" "$p.sha256"
}

# verify: every entry with a stamp is hashed against it; one that differs (or whose file is gone)
# is removed with its stamp and named on stderr. Entries without a stamp are not cached anyway.
verify() {
  local n p bad=0
  exec 9>"$DEPS/.lock"
  flock 9
  for n in "${ALL_NAMES[@]}"; do
    p=$(path_of "$n")
    [[ -e $p.sha256 ]] || continue
    if ! (cd "$(dirname "$p")" && sha256sum --quiet --strict -c "$p.sha256" >/dev/null 2>&1); then
      log "cached $n ($p) does not match its stamp: removed, it is built again when asked for"
      rm -rf "$p" "$p.sha256"
      bad=$((bad + 1))
    fi
  done
  flock -u 9
  log "verified the cache $DEPS: $bad entr$( ((bad == 1)) && echo y || echo ies) removed"
}

apt_ensure() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed; check network access to the Debian mirror"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    die "apt-get install ${missing[*]} failed; install them by hand and re-run"
}

# check_wrapper GROUP PATTERN: the committed wrapper module must pin the version this script wants.
check_wrapper() {
  local dir=$WRAPPERS/$1
  [[ -f $dir/go.mod && -f $dir/go.sum ]] ||
    die "wrapper module $dir is missing; restore it from git or run: scripts/deps.sh regen $1"
  grep -Eq "$2" "$dir/go.mod" ||
    die "$dir/go.mod does not pin $(version_of "$1"); run: scripts/deps.sh regen $1"
}

# gobuild DIR ARGS...: go build inside wrapper module DIR, reproducibly.
gobuild() {
  local dir=$1; shift
  (cd "$dir" && GOFLAGS="-mod=readonly -buildvcs=false" "$GO" build -trimpath "$@")
}
goinstall() {
  local bin=$1; shift
  (cd "$DEPS" && GOBIN=$bin GOFLAGS="-buildvcs=false" "$GO" install -trimpath "$@")
}

# build_group GROUP TMPDIR NAME...: build NAMEs of GROUP into TMPDIR/<name>.
build_group() {
  local g=$1 tmp=$2; shift 2
  local v; v=$(version_of "$g")
  case $g in
    kubernetes)
      check_wrapper kubernetes "k8s.io/kubernetes $KUBE_VERSION\$"
      local X=k8s.io/component-base/version minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
      local bd; bd=$(date -u +%Y-%m-%dT%H:%M:%SZ)
      local pkgs=() n; for n in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$n"); done
      CGO_ENABLED=0 gobuild "$WRAPPERS/kubernetes" -o "$tmp/" -ldflags "-s -w \
        -X $X.gitVersion=$KUBE_VERSION -X $X.gitMajor=1 -X $X.gitMinor=$minor \
        -X $X.gitTreeState=clean -X $X.gitCommit=unknown-module-proxy-$KUBE_VERSION -X $X.buildDate=$bd" \
        "${pkgs[@]}"
      ;;
    etcd)
      check_wrapper etcd "go.etcd.io/etcd/server/v3 $ETCD_VERSION\$"
      for n in "$@"; do
        local pkg=go.etcd.io/etcd/server/v3
        [[ $n == etcdctl ]] && pkg=go.etcd.io/etcd/etcdctl/v3
        [[ $n == etcdutl ]] && pkg=go.etcd.io/etcd/etcdutl/v3
        CGO_ENABLED=0 gobuild "$WRAPPERS/etcd" -o "$tmp/$n" \
          -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD_VERSION" "$pkg"
      done
      ;;
    etcd-benchmark)
      check_wrapper etcd-benchmark "go.etcd.io/etcd/v3 $ETCD_BENCH_VERSION\$"
      CGO_ENABLED=0 gobuild "$WRAPPERS/etcd-benchmark" -o "$tmp/etcd-benchmark" -ldflags "-s -w" \
        go.etcd.io/etcd/v3/tools/benchmark
      ;;
    cri-tools)
      check_wrapper cri-tools "sigs.k8s.io/cri-tools $CRI_TOOLS_VERSION\$"
      local ld="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRI_TOOLS_VERSION#v}"
      for n in "$@"; do
        if [[ $n == crictl ]]; then
          CGO_ENABLED=0 gobuild "$WRAPPERS/cri-tools" -o "$tmp/crictl" -ldflags "$ld" sigs.k8s.io/cri-tools/cmd/crictl
        else # critest is a Go test binary
          (cd "$WRAPPERS/cri-tools" && CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" \
            "$GO" test -c -trimpath -o "$tmp/critest" -ldflags "$ld" sigs.k8s.io/cri-tools/cmd/critest)
        fi
      done
      ;;
    kine)
      # kine's own scripts/build: CGO (mattn/go-sqlite3) with these tags and SQLite options.
      apt_ensure gcc libc6-dev
      local cflags=(-DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_DISABLE_INTRINSIC -DSQLITE_ENABLE_COLUMN_METADATA
        -DSQLITE_ENABLE_DBPAGE_VTAB -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_MATH_FUNCTIONS
        -DSQLITE_ENABLE_MEMORY_MANAGEMENT -DSQLITE_ENABLE_OFFSET_SQL_FUNC -DSQLITE_ENABLE_PREUPDATE_HOOK
        -DSQLITE_ENABLE_RBU -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_SESSION -DSQLITE_ENABLE_SNAPSHOT
        -DSQLITE_ENABLE_STAT4 -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_LIKE_DOESNT_MATCH_BLOBS
        -DSQLITE_THREADSAFE=1 -DSQLITE_WITHOUT_ZONEMALLOC)
      CGO_ENABLED=1 CGO_CFLAGS="${cflags[*]}" goinstall "$tmp" \
        -tags nats,sqlite_unlock_notify,sqlite_vtable,sqlite_stat4,sqlite_preupdate_hook,sqlite_math_functions,sqlite_dbstat,sqlite_column_metadata \
        -ldflags "-s -w -X github.com/k3s-io/kine/pkg/version.Version=$KINE_VERSION -X github.com/k3s-io/kine/pkg/version.GitCommit=module-proxy" \
        "github.com/k3s-io/kine@$KINE_VERSION"
      ;;
    runc)
      apt_ensure gcc libc6-dev libseccomp-dev pkg-config
      CGO_ENABLED=1 goinstall "$tmp" -tags seccomp -ldflags "-X main.gitCommit=$RUNC_VERSION" \
        "github.com/opencontainers/runc@$RUNC_VERSION"
      ;;
    cni-plugins)
      mkdir -p "$tmp/cni-plugins"
      local m=github.com/containernetworking/plugins/plugins
      CGO_ENABLED=0 goinstall "$tmp/cni-plugins" \
        -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_VERSION" \
        "$m/main/bridge@$CNI_VERSION" "$m/ipam/host-local@$CNI_VERSION" \
        "$m/meta/portmap@$CNI_VERSION" "$m/main/loopback@$CNI_VERSION"
      ;;
    coredns)
      # The wrapper is a package main of its own (scripts/deps/coredns/main.go): upstream's
      # coredns.go with only the plugins of kubeadm's default Corefile.
      check_wrapper coredns "github.com/coredns/coredns $COREDNS_VERSION\$"
      CGO_ENABLED=0 gobuild "$WRAPPERS/coredns" -o "$tmp/coredns" \
        -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=module-proxy-$COREDNS_VERSION" .
      ;;
  esac
}

# ensure NAME...: build every missing NAME, one group at a time, under the cache lock.
ensure() {
  local missing=() n
  for n in "$@"; do is_cached "$n" || missing+=("$n"); done
  ((${#missing[@]})) || return 0
  exec 9>"$DEPS/.lock"
  if ! flock -n 9; then log "another deps.sh is building; waiting for $DEPS/.lock"; flock 9; fi
  rm -rf "$DEPS"/.tmp-* # only the lock holder creates these: any left now are from a killed build
  local groups=() g seen=" "
  for n in "${missing[@]}"; do
    g=$(group_of "$n"); [[ $seen == *" $g "* ]] || { groups+=("$g"); seen+="$g "; }
  done
  for g in "${groups[@]}"; do
    local names=()
    for n in "${missing[@]}"; do [[ $(group_of "$n") == "$g" ]] && ! is_cached "$n" && names+=("$n"); done
    ((${#names[@]})) || continue # built by whoever held the lock before us
    local v dest tmp start
    v=$(version_of "$g"); dest=$DEPS/$g-$v
    mkdir -p "$dest"
    tmp=$(mktemp -d "$DEPS/.tmp-$g-XXXXXX")
    start=$SECONDS
    log "building ${names[*]} ($g $v) ..."
    if ! build_group "$g" "$tmp" "${names[@]}" >&2; then
      rm -rf "$tmp"; die "building ${names[*]} ($g $v) failed (see the go output above)"
    fi
    for n in "${names[@]}"; do
      rm -f "$dest/$n.sha256"
      if [[ $n == cni-plugins ]]; then rm -rf "$dest/cni-plugins"; mv "$tmp/cni-plugins" "$dest/cni-plugins"
      else mv -f "$tmp/$n" "$dest/$n"; fi
      stamp "$n"
    done
    rm -rf "$tmp"
    log "built ${names[*]} in $((SECONDS - start))s -> $dest"
  done
  flock -u 9
}

# regen GROUP: regenerate a wrapper module's go.mod/go.sum from the versions above.
regen() {
  local g=$1 dir=$WRAPPERS/$1
  [[ -f $dir/go.mod ]] || die "unknown wrapper '$g'; wrappers are: $(cd "$WRAPPERS" && echo */ | tr -d /)"
  case $g in
    kubernetes)
      local info; info=$(cd /tmp && "$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION") ||
        die "go mod download k8s.io/kubernetes@$KUBE_VERSION failed"
      local gomod; gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$info")
      {
        printf 'module quantykube.local/deps/kubernetes\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\n' "$KUBE_VERSION"
        printf '// Every k8s.io staging module of kubernetes %s (its go.mod "=> ./staging/..." lines).\nreplace (\n' "$KUBE_VERSION"
        grep -E '=> \./staging/' "$gomod" | awk -v v="$KUBE_STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
        printf ')\n'
      } >"$dir/go.mod"
      ;;
    etcd) printf 'module quantykube.local/deps/etcd\n\ngo 1.26.0\n\nrequire (\n\tgo.etcd.io/etcd/etcdctl/v3 %s\n\tgo.etcd.io/etcd/etcdutl/v3 %s\n\tgo.etcd.io/etcd/server/v3 %s\n)\n' \
      "$ETCD_VERSION" "$ETCD_VERSION" "$ETCD_VERSION" >"$dir/go.mod" ;;
    etcd-benchmark) printf 'module quantykube.local/deps/etcd-benchmark\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/v3 %s\n' \
      "$ETCD_BENCH_VERSION" >"$dir/go.mod" ;;
    cri-tools) printf 'module quantykube.local/deps/cri-tools\n\ngo 1.26.6\n\nrequire sigs.k8s.io/cri-tools %s\n' \
      "$CRI_TOOLS_VERSION" >"$dir/go.mod" ;;
    coredns) printf 'module quantykube.local/deps/coredns\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' \
      "$COREDNS_VERSION" >"$dir/go.mod" ;;
    *) die "no regen recipe for '$g'" ;;
  esac
  rm -f "$dir/go.sum"
  (cd "$dir" && "$GO" mod tidy) || die "go mod tidy in $dir failed"
  log "regenerated $dir/go.mod and go.sum; commit them"
}

usage() {
  cat >&2 <<EOF
usage: scripts/deps.sh path NAME... | env NAME... | list | verify | regen WRAPPER
names: ${ALL_NAMES[*]}
EOF
  exit 2
}

main() {
  (($#)) || usage
  local cmd=$1; shift
  find_go
  setup_cache
  case $cmd in
    path|env)
      (($#)) || die "'$cmd' needs at least one NAME; names: ${ALL_NAMES[*]}"
      local n
      for n in "$@"; do
        group_of "$n" >/dev/null || die "unknown component '$n'; valid names: ${ALL_NAMES[*]}"
      done
      ensure "$@"
      for n in "$@"; do
        if [[ $cmd == path ]]; then path_of "$n"
        else local var=${n^^}; echo "export QK_${var//-/_}=$(path_of "$n")"; fi
      done
      ;;
    list)
      local n
      for n in "${ALL_NAMES[@]}"; do
        local g st=missing; g=$(group_of "$n"); is_cached "$n" && st=cached
        printf '%-24s %-9s %s\n' "$n" "$(version_of "$g")" "$st"
      done
      ;;
    verify) (($# == 0)) || die "verify takes no names: it checks every cached entry"; verify ;;
    regen) (($# == 1)) || die "usage: scripts/deps.sh regen WRAPPER (one of: kubernetes etcd etcd-benchmark cri-tools coredns)"; regen "$1" ;;
    -h|--help|help) usage ;;
    *) die "unknown command '$cmd'; use path, env, list, verify or regen" ;;
  esac
}

main "$@"
