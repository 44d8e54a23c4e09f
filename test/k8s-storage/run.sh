#!/usr/bin/env bash
# run.sh — run the Kubernetes storage test suites (k8s.io/apiserver v0.37.2 pkg/storage/etcd3/... and
# pkg/storage/cacher/...) against a fresh `quantykube store` process per test, or against real etcd.
#
#   test/k8s-storage/run.sh [--store-bin PATH] [--run REGEX] [--against-etcd] [--pkg REGEX] [--race]
#                           [--bench REGEX [--benchtime D]] [--timeout DURATION] [--results DIR]
#                           [--members 1|3]
#
#   --store-bin PATH  quantykube binary to test (default: $QK_STORE_BIN, else build ./cmd/quantykube into the cache)
#   --run REGEX       passed as -test.run to every test binary (e.g. 'TestWatch|TestList')
#   --against-etcd    run the same suites against etcd 3.6.16 from scripts/deps.sh (validates the harness)
#   --pkg REGEX       only packages whose import path matches (e.g. 'etcd3$')
#   --race            build ./cmd/quantykube with -race; a test fails when the store reports a data race
#   --bench REGEX     run benchmarks matching REGEX (-test.bench, -test.benchmem) and no tests unless --run
#   --benchtime D     -test.benchtime for --bench (default: Go's 1s; e.g. 1x for one iteration)
#   --timeout D       -test.timeout per package (default 60m)
#   --results DIR     where test2json output and logs go (default: <cache>/k8s-storage/results/<time>-<server>)
#   --members 1|3     members per test (default 1); 3 starts a replicated cluster per test with etcd's
#                     clustering flags (--initial-cluster ...) and gives the client all three endpoints
#   --fast-stop       with --members 3: SIGKILL the followers at test cleanup (the leader still gets SIGTERM
#                     and must exit cleanly); saves ~1 s per test that starts a cluster
#
# How: the module source of k8s.io/apiserver@v0.37.2 is copied from the Go module cache into
# ${QK_CACHE:-~/.cache/quantykube}/k8s-storage/apiserver-v0.37.2, every import of
# k8s.io/apiserver/pkg/storage/etcd3/testserver there is rewritten to
# k8s.io/apiserver/pkg/storage/quantykube/testserver, a copy of ./testserver (refreshed on every run), which
# starts one server process per RunEtcd call. Test binaries are built with `go test -c` and run with
# -test.count 1 from their package directory; the summary counts every test and subtest.
# Exit status: 0 when nothing failed, 1 on test failures, 2 on usage or build errors.
set -euo pipefail

APISERVER_VERSION=v0.37.2
PACKAGES=(./pkg/storage/etcd3/... ./pkg/storage/cacher/...)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)

log() { printf '[k8s-storage %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }

store_bin=${QK_STORE_BIN:-} members=1 run_re="" against_etcd=0 pkg_re="" timeout=60m results="" race=0 bench_re="" benchtime=""
while (($#)); do
  case $1 in
    --store-bin) (($# >= 2)) || die "--store-bin needs a path"; store_bin=$2; shift 2 ;;
    --run) (($# >= 2)) || die "--run needs a regular expression"; run_re=$2; shift 2 ;;
    --against-etcd) against_etcd=1; shift ;;
    --fast-stop) export QK_K8S_STORAGE_FAST_STOP=1; shift ;;
    --members) (($# >= 2)) || die "--members needs 1 or 3"; members=$2; shift 2 ;;
    --race) race=1; shift ;;
    --bench) (($# >= 2)) || die "--bench needs a regular expression"; bench_re=$2; shift 2 ;;
    --benchtime) (($# >= 2)) || die "--benchtime needs a duration like 10s or 5x"; benchtime=$2; shift 2 ;;
    --pkg) (($# >= 2)) || die "--pkg needs a regular expression"; pkg_re=$2; shift 2 ;;
    --timeout) (($# >= 2)) || die "--timeout needs a duration like 30m"; timeout=$2; shift 2 ;;
    --results) (($# >= 2)) || die "--results needs a directory"; results=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    *) die "unknown argument '$1'; see --help" ;;
  esac
done

[[ $members == 1 || $members == 3 ]] || die "--members $members: use 1 or 3"
export QK_K8S_STORAGE_MEMBERS=$members
command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
command -v go >/dev/null || die "no Go toolchain; install Go 1.26 at /usr/local/go"
if ! command -v jq >/dev/null; then
  log "installing jq"
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >&2; }; then
    die "apt-get install jq failed; install jq by hand"
  fi
fi

CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
mkdir -p "$CACHE/k8s-storage"
CACHE=$(cd "$CACHE" && pwd)
WORK=$CACHE/k8s-storage/apiserver-$APISERVER_VERSION
SRC=$WORK/src

# 1. The server under test.
if ((against_etcd)); then
  server=etcd
  QK_ETCD=$("$REPO_ROOT/scripts/deps.sh" path etcd) || die "scripts/deps.sh path etcd failed"
  export QK_ETCD QK_K8S_STORAGE_SERVER=etcd
  log "server: etcd $("$QK_ETCD" --version | head -1)"
else
  server=quantykube
  if [[ -z $store_bin ]]; then
    build=(go build); store_bin=$CACHE/k8s-storage/quantykube
    ((race)) && { build=(env CGO_ENABLED=1 go build -race); store_bin+=-race; }
    log "building ./cmd/quantykube -> $store_bin"
    (cd "$REPO_ROOT" && "${build[@]}" -o "$store_bin.tmp" ./cmd/quantykube && mv -f "$store_bin.tmp" "$store_bin") ||
      die "go build ./cmd/quantykube failed; fix the build or pass --store-bin PATH"
  elif ((race)); then
    die "--race builds the store itself; drop --store-bin (or build your binary with -race)"
  fi
  [[ -x $store_bin ]] || die "store binary '$store_bin' is not executable; pass --store-bin PATH to a quantykube binary"
  QK_STORE_BIN=$(cd "$(dirname "$store_bin")" && pwd)/$(basename "$store_bin")
  "$QK_STORE_BIN" store --help >/dev/null 2>&1 ||
    die "'$QK_STORE_BIN store --help' fails; the binary has no working 'store' command yet"
  # The help is read whole first: `grep -q` ends the pipe early, and the store's SIGPIPE would fail
  # the pipeline under pipefail.
  if ((members > 1)) && [[ $("$QK_STORE_BIN" store --help 2>&1) != *--initial-cluster* ]]; then
    die "'$QK_STORE_BIN store' has no --initial-cluster flag yet (replication, issue #13); run --members 3 with --against-etcd or a store that has it"
  fi
  export QK_STORE_BIN QK_K8S_STORAGE_SERVER=quantykube
  log "server: $QK_STORE_BIN store"
fi

# 2. The suites' source, with the testserver import rewritten (copied once, atomically).
if [[ ! -f $SRC/.qk-prepared ]]; then
  modinfo=$(cd /tmp && go mod download -json "k8s.io/apiserver@$APISERVER_VERSION") ||
    die "go mod download k8s.io/apiserver@$APISERVER_VERSION failed; check GOPROXY"
  moddir=$(jq -r .Dir <<<"$modinfo")
  log "copying $moddir -> $SRC"
  tmp=$(mktemp -d "$WORK.tmp-XXXXXX")
  cp -r "$moddir/." "$tmp/"
  chmod -R u+w "$tmp"
  grep -rl --include='*.go' '"k8s.io/apiserver/pkg/storage/etcd3/testserver"' "$tmp" | while read -r f; do
    sed -i 's#"k8s.io/apiserver/pkg/storage/etcd3/testserver"#"k8s.io/apiserver/pkg/storage/quantykube/testserver"#' "$f"
  done
  touch "$tmp/.qk-prepared"
  rm -rf "$SRC"; mkdir -p "$WORK"; mv "$tmp" "$SRC"
fi
mkdir -p "$SRC/pkg/storage/quantykube/testserver"
rm -f "$SRC/pkg/storage/quantykube/testserver/"*.go
cp "$HERE/testserver/"*.go "$SRC/pkg/storage/quantykube/testserver/"

# 3. Test binaries, one per package with tests.
listed=$(cd "$SRC" && go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' "${PACKAGES[@]}") ||
  die "go list in $SRC failed; delete $WORK to re-copy the module source"
mapfile -t pkgs < <(grep . <<<"$listed")
if [[ -n $pkg_re ]]; then
  mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | grep -E -- "$pkg_re" || true)
fi
((${#pkgs[@]})) || die "no package matches --pkg '$pkg_re'"
BIN=$WORK/bin
mkdir -p "$BIN"
log "compiling ${#pkgs[@]} test binaries"
for p in "${pkgs[@]}"; do
  name=${p#k8s.io/apiserver/}; name=${name//\//_}.test
  (cd "$SRC" && go test -c -o "$BIN/$name" "$p") || die "go test -c $p failed"
done

# 4. Run each package from its own directory (testdata paths are relative), through test2json.
suffix=$server; ((members > 1)) && suffix+=-$members-members
results=${results:-$CACHE/k8s-storage/results/$(date -u +%Y%m%dT%H%M%SZ)-$suffix}
mkdir -p "$results"
log "results -> $results ($members member(s) per test)"
args=(-test.count 1 -test.v=test2json -test.timeout "$timeout")
# Upstream flakes that never reach a store: skipped, because a panic in one ends its whole package's run.
# TestWatchNotHangingOnStartupFailure runs a cacher on cachertesting.MockStorage (no server at all); when
# the cacher turns ready between the mock's list and its failing watch, Cacher.Watch dereferences the
# test's nil predicate field (cacher.go:540) and the panic ended pkg/storage/cacher after 970 of its
# results (CI, 6 December 19:58, on a loaded machine). Upstream: kubernetes/kubernetes#131541, #131575.
UPSTREAM_FLAKES='^TestWatchNotHangingOnStartupFailure$'
args+=(-test.skip "$UPSTREAM_FLAKES")
[[ -n $run_re ]] && args+=(-test.run "$run_re")
if [[ -n $bench_re ]]; then
  args+=(-test.bench "$bench_re" -test.benchmem)
  [[ -n $run_re ]] || args+=(-test.run '^$')
  [[ -n $benchtime ]] && args+=(-test.benchtime "$benchtime")
fi
# rerun_alone PKG NAME: a package whose run failed only in tests (no panic, no timeout) has
# each failing top-level test run once more, alone (the same binary, -test.run '^(T1|T2)$'):
# the storage suites' watch tests wait on real time (TestWatch's bookmark case: a 3 s watch
# that must see a bookmark sent about once a second), and stage 2 runs beside two clusters at
# 90+ % CPU. It passes only if every one of them passes alone; then the stage passes, and the
# summary says FLAKY with the first attempt's output kept (NAME.json) and the rerun's beside it
# (NAME.rerun.jsonl, outside the summary's *.json) — a flake is reported, never hidden. A failure alone fails the stage.
rerun_alone() {
  local p=$1 name=$2 tests re
  if grep -q -e 'panic: ' -e 'test timed out after' "$results/$name.json"; then return 1; fi
  tests=$(jq -r 'select(.Action == "fail" and .Test != null and (.Test | contains("/") | not)) | .Test' "$results/$name.json" | sort -u)
  [[ -n $tests ]] || return 1
  re="^($(paste -sd'|' <<<"$tests"))\$"
  log "$p: $(wc -l <<<"$tests") test(s) failed in the full run ($(paste -sd' ' <<<"$tests")); each once more, alone"
  jq -r --arg t "$(head -1 <<<"$tests")" 'select(.Action == "output" and .Test != null and (.Test | startswith($t))) | .Output' \
    "$results/$name.json" | grep -E -- '--- FAIL|_test.go:[0-9]+:|\.go:[0-9]+: ' | tail -n 20 | sed 's/^/    first attempt: /' >&2 || true
  set +e
  (cd "$SRC/${p#k8s.io/apiserver/}" && go tool test2json -t -p "$p" "$BIN/$name.test" "${args[@]}" -test.run "$re") \
    >"$results/$name.rerun.jsonl" 2>"$results/$name.rerun.stderr"
  local rc=$?
  set -e
  if ((rc != 0)); then
    log "$p: failed again alone (exit $rc): see $results/$name.rerun.jsonl"
    return 1
  fi
  while read -r t; do
    echo "FLAKY: $p $t failed in the full run and passed alone (first attempt: $results/$name.json)" | tee -a "$results/flaky.txt" >&2
  done <<<"$tests"
  return 0
}
status=0
for p in "${pkgs[@]}"; do
  name=${p#k8s.io/apiserver/}; name=${name//\//_}
  start=$SECONDS
  log "running $p"
  set +e
  (cd "$SRC/${p#k8s.io/apiserver/}" && go tool test2json -t -p "$p" "$BIN/$name.test" "${args[@]}") \
    >"$results/$name.json" 2>"$results/$name.stderr"
  rc=$?
  set -e
  log "$p: exit $rc in $((SECONDS - start))s"
  if ((rc != 0)) && [[ -z $bench_re ]] && rerun_alone "$p" "$name"; then rc=0; fi
  ((rc == 0)) || status=1
done

# 5. Summary over every test and subtest.
cat "$results"/*.json | jq -s -r '
  [ .[] | select(.Test != null and (.Action == "pass" or .Action == "fail" or .Action == "skip")) ] as $ev
  | ($ev | map(select(.Action == "pass")) | length) as $p
  | ($ev | map(select(.Action == "fail")) | length) as $f
  | ($ev | map(select(.Action == "skip")) | length) as $s
  | "passed: \($p)  failed: \($f)  skipped: \($s)  (tests and subtests)",
    ($ev | map(select(.Action == "fail")) | if length > 0 then "failures:" else empty end),
    ($ev | map(select(.Action == "fail")) | .[] | "  FAIL \(.Package) \(.Test) (\(.Elapsed)s)")
' | tee "$results/summary.txt"
# Packages that failed without a failing test (build/panic/timeout) show up here.
for p in "${pkgs[@]}"; do
  name=${p#k8s.io/apiserver/}; name=${name//\//_}
  if jq -e -s 'any(.[]; .Test == null and .Action == "fail")' "$results/$name.json" >/dev/null; then
    echo "package FAIL: $p (see $results/$name.json)" | tee -a "$results/summary.txt"
  fi
done
if [[ -n $bench_re ]]; then
  cat "$results"/*.json | jq -j 'select(.Action == "output") | .Output' |
    grep -E '^Benchmark.*[0-9]+ ns/op' | sed 's/[[:space:]]*$//' | tee "$results/bench.txt" || true
fi
# One line per test and subtest (ACTION, package, name), comparable with the committed etcd baseline.
cat "$results"/*.json | jq -r 'select(.Test != null and (.Action == "pass" or .Action == "fail" or .Action == "skip"))
  | "\(.Action | ascii_upcase)\t\(.Package | sub("k8s.io/apiserver/"; ""))\t\(.Test)"' |
  sort -t$'\t' -k2,2 -k3,3 >"$results/results.tsv"
baseline=$HERE/results-etcd-3.6.16.tsv
if [[ ($server == quantykube || $members != 1) && -f $baseline && -z $run_re && -z $pkg_re ]]; then
  regress=$(comm -12 <(awk -F'\t' '$1=="PASS"{print $2" "$3}' "$baseline" | LC_ALL=C sort) \
    <(awk -F'\t' '$1=="FAIL"{print $2" "$3}' "$results/results.tsv" | LC_ALL=C sort) | wc -l)
  echo "failing here but passing on etcd 3.6.16 (1 member): $regress (compare $results/results.tsv with $baseline)" |
    tee -a "$results/summary.txt"
  # Every result that differs from the baseline (a test passing here and failing there counts too).
  diff <(LC_ALL=C sort "$baseline") <(LC_ALL=C sort "$results/results.tsv") | grep '^[<>]' |
    sed 's/^</  baseline:/; s/^>/  this run:/' | tee "$results/baseline-diff.txt" >&2 || true
  echo "results differing from the 1-member etcd baseline: $(grep -c 'this run:' "$results/baseline-diff.txt" || true)" |
    tee -a "$results/summary.txt"
fi
[[ ! -s $results/flaky.txt ]] || { echo "flaky (failed in the full run, passed alone; counted as failed above):"; cat "$results/flaky.txt"; } | tee -a "$results/summary.txt"
echo "details: $results" >&2
exit $status
