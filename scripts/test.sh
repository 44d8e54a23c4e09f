#!/usr/bin/env bash
# test.sh — every test of the project, with real components (README's second command; .ci/run runs it).
#
#   scripts/test.sh            every stage (CI's run)
#   scripts/test.sh --quick    before a commit (13.5 min warm here): go vet, generated files, every package's
#                              tests (the store's end-to-end tests among them) and, beside them, one
#                              cluster with one move of its datastore there and back (TestMoveStoreAndBack)
#
# Stages; the first failure stops the run and its exit code is the script's. With a cluster stage
# (3, 4 or 7) selected, the cluster stages run on TWO clusters side by side (lanes A and B, each a
# kubeadm cluster of systemd-nspawn nodes in its own slot), while 1, 2 and 6 run in a third lane at
# nice 10; lane A runs 5 once its cluster is down. Without one: 1, 2, 5, then 6.
#   1. go vet, generated files up to date, every package's tests from the test binaries compiled once
#      for the run (scripts/test/compile.sh, scripts/test/gotest.sh): unit tests, the end-to-end store
#      tests of test/store (etcdctl 3.6, kill -9 under load, a real kube-apiserver v1.36.3 + kubectl) and
#      the operator's reconciler tests against a real kube-apiserver + etcd
#   2. the Kubernetes storage suites (k8s.io/apiserver v0.37.2 etcd3 + cacher) against the store; then
#      the 3-member store: test/store's etcdctl, kill -9 and kube-apiserver tests on 3 members (stage 1 runs
#      the TestCluster* tests: partition, leader kill, membership), and etcd's tests/robustness
#      traffic (Kubernetes, EtcdPutDeleteLease) and validators with a member SIGKILLed every few seconds
#   Lane A (stages 3 and 4): `up --lb --workers 1` (one control plane whose controlPlaneEndpoint is an
#      HAProxy node, and a worker) killed with kill -9 once its nodes booted (test/kubeadm/crash.sh),
#      `up` again over the remains (it must complete), `up` again over the running cluster (up twice in
#      a row), smoke; then install store / undo store (scripts/kubeadm.sh move, test/move) with a failure
#      and a kill -9 at every step, kubeadm upgrade on the moved cluster, a manifest pointed back
#      refused, undo after a long life on the store; down, down again.
#   Lane B (stages 4, 7 and 3): `up --lb --workers 1`, smoke; install runtime / undo runtime on the
#      worker and the control plane (scripts/kubeadm.sh node, test/noderuntime) with faults and bad
#      input; then, back on etcd and containerd, the operator end to end (scripts/kubeadm.sh e2e,
#      TestOperator): 5,000 objects, deploy/quantykube.yaml applied, the store and a labelled worker
#      Moved then Undone with the operator pod killed at every step, every resourceVersion kept, every
#      pod Running; a worker with an injected fault: Failed within its deadline, rolled back; then the
#      cluster grown to 3 control planes behind the load balancer (grow --control-planes 3), smoke, and
#      TestOperatorHA (the store's HA move and undo through the Installation, a Prober, a writer and
#      watchers on the load balancer, the store's leader killed mid-way); down, down again.
#   Lane A then runs stage 5 (below) once its cluster is down, beside lane B's cluster.
#   After both lanes: the host compared with its snapshot taken before anything started (stage 5's
#   leftovers included).
#   5. the runtime: critest v1.37.0 fully offline (scripts/critest.sh), kill -9 and restart of the
#      runtime with containers running (scripts/critest/restart.sh), a real kubelet on it
#      (scripts/critest/kubelet.sh)
#   6. bench/run.sh --quick: every benchmark workload once against the store, etcd and kine (a smoke
#      check that asserts that each ran, never a number; the full run writes docs/benchmarks.md)
# Every stage and step prints its start (time of day, time since the start) and, at its end, how long
# it took; the run ends with the stage table (scripts/test/times.sh: each stage's start, wall time and
# the CPUs' busy share meanwhile; cold or warm), also appended to $QK_CACHE/test-times.tsv.
#
# Real binaries are built from the Go module proxy by scripts/deps.sh and cached, with the node
# templates and images, under ${QK_CACHE:-${XDG_CACHE_HOME:-~/.cache}/quantykube} — outside the clone,
# so a fresh clone on the same machine finds them (docs/adr/301). The run's own outputs (its quantykube
# binary, test binaries, lane logs) go to <clone>/.cache/test-run.
# STAGES="1 2" selects stages (default: all).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/local/go/bin
# One build configuration for every go build, vet and test of the run: the
# image's (static, paths trimmed; scripts/kubeadm/lib/common.sh's
# build_quantykube). A second one (cgo, or paths kept) compiles the whole
# tree again: each was 4-6 minutes of a cold run's two cores. (The peers'
# builds in scripts/deps.sh set their own.)
export CGO_ENABLED=0 GOFLAGS=-trimpath
QUICK=false
case ${1:-} in
  --quick) QUICK=true; shift ;;
  "") ;;
  *) echo "test.sh: unknown argument '$1'; usage: scripts/test.sh [--quick] (STAGES=\"1 2\" picks stages)" >&2; exit 2 ;;
esac
(($# == 0)) || { echo "test.sh: unexpected argument '$1'; usage: scripts/test.sh [--quick]" >&2; exit 2; }
if $QUICK; then
  [[ -z ${STAGES:-} ]] || { echo "test.sh: --quick is its own selection (1 and one move); drop STAGES or --quick" >&2; exit 2; }
  STAGES="1 4"
fi
STAGES=${STAGES:-"1 2 3 4 5 6 7"}   # 3, 4, 7 on two clusters (5 on lane A after its down) with 1, 2, 6 beside them; without a cluster stage 1, 2, 5, 6
CACHE=${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}
export QK_CACHE=$CACHE
RUN=$ROOT/.cache/test-run   # this run's own outputs (per clone)
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$CACHE"
# shellcheck source=test/times.sh
source "$ROOT/scripts/test/times.sh"
T0=$SECONDS
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
stage() { printf '\n=== %s (%s, +%s)\n' "$*" "$(date -u +%H:%M:%S)" "$(mmss $((SECONDS - T0)))"; }
# timed WHAT CMD...: a step: its start as stage prints it, CMD, then how long
# it took (or that it failed, and after how long; the run or the lane stops
# there), recorded in the stage table. CMD must be a command, not a shell
# function (under `||` a function would run without set -e).
timed() {
  local what=$1 t0=$SECONDS e0 rc=0
  e0=$(date +%s)
  shift
  stage "$what"
  "$@" || rc=$?
  if ((rc == 0)); then
    times_record "$what" "$e0" "$(date +%s)" passed
    echo "--- $what: done in $(mmss $((SECONDS - t0)))"
  else
    times_record "$what" "$e0" "$(date +%s)" "FAILED (exit $rc)"
    echo "--- $what: FAILED (exit $rc) after $(mmss $((SECONDS - t0)))"
    exit "$rc"
  fi
  lanes_check
}
want() { [[ " $STAGES " == *" $1 "* ]]; }

# cold: something the run needs is not built yet (a peer, a node template) or Go's build cache is empty.
KIND=warm
if scripts/deps.sh list 2>/dev/null | grep -q ' missing$' || ! compgen -G "$CACHE/kubeadm/template-*/.complete" >/dev/null ||
  [[ ! -d $(go env GOCACHE) || -z $(ls -A "$(go env GOCACHE)" 2>/dev/null) ]]; then KIND=cold; fi
times_init "$RUN" "$KIND"
RESULT=failed
LANE_B_PID= SIDE_PID= CLUSTERS_UP=false SLOT_A= SLOT_B_ENV=
# on_exit: whatever ended the run, stop the lanes still running (each is a
# process group of its own), take the clusters down, print the stage table.
on_exit() {
  local pid
  for pid in $LANE_B_PID $SIDE_PID; do kill -- "-$pid" 2>/dev/null || true; done
  if $CLUSTERS_UP; then
    QK_SLOT=$SLOT_A scripts/kubeadm.sh down >/dev/null 2>&1 || true
    [[ -z $SLOT_B_ENV ]] || (eval "$SLOT_B_ENV"; scripts/kubeadm.sh down >/dev/null 2>&1) || true
  fi
  times_report "$RESULT"
}
trap on_exit EXIT

stage "building quantykube and the real components ($KIND run; cache $CACHE)"
e0=$(date +%s)
scripts/deps.sh verify   # a cached binary that differs from its stamp is removed and built again
# The clusters' node templates (debootstrap: ~2.5 min cold, mostly download
# and unpack) and the load balancer's are built in the background from the
# start, beside the Kubernetes build below; the images once deps.sh has
# every binary (after the prefetch below). The lanes then boot their nodes
# at once instead of building them first. Under the template lock and
# deps.sh's: an `up` that comes first waits for them.
clusters=false
if want 3 || want 4 || want 7; then
  clusters=true
  scripts/kubeadm.sh prereqs   # apt here, not beside another apt-get in the background
  # Two slots (bridge, node subnet, names, state dir): lane A's and lane B's.
  # Neither touches a cluster left running by other work on this host.
  eval "$(scripts/kubeadm.sh free-slot)"
  SLOT_A=$QK_SLOT
  if ! $QUICK; then SLOT_B_ENV=$(QK_SLOT_SKIP=$SLOT_A scripts/kubeadm.sh free-slot); fi
  # The host's snapshot, compared after the clusters' last `down`, is taken
  # before anything starts in the background: a template build under way
  # has debootstrap's /proc mounted in its rootfs (CI, 6 December: the
  # snapshot caught it, the comparison then failed on a mount that was gone).
  snap=$(mktemp -d /tmp/qk-ci-host.XXXXXX)
  scripts/kubeadm.sh down >/dev/null 2>&1 || true
  [[ -z $SLOT_B_ENV ]] || (eval "$SLOT_B_ENV"; scripts/kubeadm.sh down >/dev/null 2>&1) || true
  test/kubeadm/snapshot.sh "$snap/before"
  QK_CONTROL_PLANES=3 scripts/kubeadm.sh templates >"$RUN/kubeadm-templates.log" 2>&1 &
fi

go build -buildvcs=false -ldflags "-s -w" -o "$RUN/bin/quantykube" ./cmd/quantykube
export QK_STORE_BIN=$RUN/bin/quantykube
eval "$(scripts/deps.sh env etcd etcdctl etcdutl kube-apiserver kube-controller-manager)"
export QK_KUBECTL=${QK_KUBECTL:-$(command -v kubectl || echo /usr/bin/kubectl)}
times_record "builds in the foreground (quantykube, etcd, kube-apiserver, kube-controller-manager)" "$e0" "$(date +%s)" passed
# The components later stages need are built in the background from here
# on, beside the lanes (on a cold machine they are ~15 min): first what the
# clusters need (the rest of Kubernetes, CoreDNS, crictl, then the images:
# the clusters' first `up` waits for those), then the peers and tools of
# stages 5 and 6. deps.sh builds one at a time under its lock, so a stage
# that asks for one meanwhile waits for it, and a failed build here is
# retried, and reported, by the stage that needs it.
e0=$(date +%s)
(
  scripts/deps.sh path kube-scheduler kubelet kubeadm kube-proxy coredns crictl >/dev/null
  if $clusters; then QK_CONTROL_PLANES=3 scripts/kubeadm.sh build; fi
  touch "$RUN/.prefetch-clusters"
  times_record "background builds: the clusters' parts (kubelet, kubeadm, ..., the images)" "$e0" "$(date +%s)" passed
  if ! $QUICK; then scripts/deps.sh path etcd-benchmark kine critest runc cni-plugins >/dev/null; fi
  times_record "background builds: every part (+ etcd-benchmark, kine, critest, runc, CNI)" "$e0" "$(date +%s)" passed
) >"$RUN/prefetch.log" 2>&1 &
PREFETCH=$!
# clusters_built waits until the prefetch has built what the clusters need
# (or ended); built waits for all of it. A failure is reported, and what it
# missed is built (or its failure shown) by the stage that needs it.
clusters_built() {
  while [[ ! -e $RUN/.prefetch-clusters ]] && kill -0 "$PREFETCH" 2>/dev/null; do sleep 2; done
  [[ -e $RUN/.prefetch-clusters ]] || { echo "the background build of the clusters' parts failed (up builds what is missing):"; tail -n 20 "$RUN/prefetch.log"; }
}
built() {
  [[ -n $PREFETCH ]] || return 0
  wait "$PREFETCH" || { echo "the background build of the components failed (the stages build what is missing):"; tail -n 20 "$RUN/prefetch.log"; }
  PREFETCH=
}
# Every test binary of the run is compiled once (scripts/test/compile.sh)
# into $QK_TESTBIN: stage 1 runs them, and the clusters' steps run theirs
# (scripts/kubeadm/lib/common.sh go_test) instead of compiling again.
export QK_TESTBIN=$RUN/testbin
stage1() {
  stage "1. go vet, test binaries compiled once, every package's tests"
  local e0; e0=$(date +%s)
  # the clusters' test binaries first: their lanes' steps may be waiting for them
  scripts/test/compile.sh "$QK_TESTBIN" ./test/move ./test/noderuntime ./test/e2e
  go vet ./...
  scripts/generate.sh check   # the CRD, RBAC and deepcopy code match the Go types
  scripts/test/compile.sh "$QK_TESTBIN"
  times_record "1a. go vet, generated files, every test binary compiled" "$e0" "$(date +%s)" passed
  e0=$(date +%s)
  scripts/test/gotest.sh "$QK_TESTBIN" 30m
  times_record "1b. every package's tests (unit, test/store end to end, operator)" "$e0" "$(date +%s)" passed
}
stage2() {
  stage "2. Kubernetes storage suites against quantykube store"
  local e0; e0=$(date +%s)
  test/k8s-storage/run.sh --store-bin "$QK_STORE_BIN"
  times_record "2. Kubernetes storage suites (etcd3, cacher) on the store" "$e0" "$(date +%s)" passed
  stage "2b. the replicated store: test/store on 3 members (etcdctl, kill -9, kube-apiserver on every endpoint), etcd's robustness traffic with a member killed every few seconds"
  e0=$(date +%s)
  [[ -x $QK_TESTBIN/test_store.test ]] || scripts/test/compile.sh "$QK_TESTBIN" ./test/store
  (cd test/store && QK_STORE_MEMBERS=3 "$QK_TESTBIN/test_store.test" -test.count=1 -test.timeout 12m -test.v -test.run 'TestEtcdctl|TestKillNine$|TestKubeAPIServer$')
  test/robustness/run.sh --server store --bin "$QK_STORE_BIN"
  times_record "2b. the 3-member store: test/store on 3 members, etcd's robustness traffic" "$e0" "$(date +%s)" passed
}
stage6() {
  stage "6. benchmarks, quick: every workload ran on every store"
  local e0; e0=$(date +%s)
  bench/run.sh --quick
  times_record "6. bench/run.sh --quick (store, etcd, kine)" "$e0" "$(date +%s)" passed
}
stage5() {
  stage "5. the runtime: critest offline, restart under load, kubelet"
  export QK_RUNTIME_BIN=$QK_STORE_BIN
  timed "5. critest v1.37.0 offline" scripts/critest.sh
  timed "5. kill -9 of the runtime with containers running" scripts/critest/restart.sh
  timed "5. a real kubelet on the runtime" scripts/critest/kubelet.sh
}
# Lanes: lane A runs in the foreground; lane B and the side lane (stages 1,
# 2 and 6: processes on the host's loopback only, no link, rule, mount,
# cgroup or sysctl of the host changes) run in the background, each in a
# process group of its own (set -m), its output in $RUN/<lane>.log, printed
# when it ends. The clusters are the run's long poles and each leaves a
# core idle much of the time (API servers restarting, kubelet syncing,
# nodes draining); the side lane runs at nice 10, so the clusters'
# processes, whose steps wait against deadlines, come first. A failure in a
# background lane stops the run at lane A's next step (lanes_check).
SIDE=
if $clusters; then
  for s in 1 2 6; do if want "$s"; then SIDE+=" $s"; fi; done
fi
# lane_start NAME VAR CMD...: CMD in the background as lane NAME; its pid in VAR.
lane_start() {
  local name=$1 var=$2
  shift 2
  set -m
  ( "$@" ) </dev/null >"$RUN/$name.log" 2>&1 &
  printf -v "$var" '%s' "$!"
  set +m
}
side_lane() {
  renice -n 10 -p "$BASHPID" >/dev/null
  IN_LANE=true
  for s in $SIDE; do "stage$s"; done
}
# lane_wait NAME VAR: wait for lane NAME, print its log, end the run if it failed.
lane_wait() {
  local name=$1 var=$2 pid rc=0
  pid=${!var}
  [[ -n $pid ]] || return 0
  wait "$pid" || rc=$?
  printf -v "$var" '%s' ""
  echo "--- lane $name ($RUN/$name.log):"
  cat "$RUN/$name.log"
  ((rc == 0)) || { echo "lane $name failed (exit $rc)"; exit "$rc"; }
  stage "lane $name passed"
}
# lanes_check ends the run if a background lane has failed (timed calls it
# after every step of lane A); a lane that passed is reported as it ends.
IN_LANE=false
lanes_check() {
  $IN_LANE && return 0
  if [[ -n $LANE_B_PID ]] && ! kill -0 "$LANE_B_PID" 2>/dev/null; then lane_wait B LANE_B_PID; fi
  if [[ -n $SIDE_PID ]] && ! kill -0 "$SIDE_PID" 2>/dev/null; then lane_wait side SIDE_PID; fi
  return 0
}
# Lane B: its own slot; node (4), the operator (7), then grown to three
# control planes for TestOperatorHA (3). It starts once lane A's first `up`
# has booted its nodes (the artifacts are built then: no two `up`s build
# them at once) — or at once when lane A has no crash check.
lane_b() {
  IN_LANE=true
  eval "$SLOT_B_ENV"
  timed "B. up --lb --workers 1 (slot $QK_SLOT)" scripts/kubeadm.sh up --lb --workers 1
  timed "B. smoke" scripts/kubeadm.sh smoke
  if want 4; then
    timed "4 (B). install/undo runtime, faults, bad input (scripts/kubeadm.sh node)" scripts/kubeadm.sh node
  fi
  if want 7; then
    timed "7 (B). the operator: move and undo, killed at every step, a failing node (TestOperator)" scripts/kubeadm.sh e2e
  fi
  if want 3; then
    timed "3 (B). grow --control-planes 3 through the load balancer" scripts/kubeadm.sh grow --control-planes 3
    timed "3 (B). smoke (three control planes behind the load balancer)" scripts/kubeadm.sh smoke
    timed "3 (B). the operator's HA move and undo (TestOperatorHA)" scripts/kubeadm.sh e2e
  fi
  timed "B. down" scripts/kubeadm.sh down
  timed "B. down again (idempotent)" scripts/kubeadm.sh down
}
if ! $clusters; then
  if want 1; then stage1; fi
  if want 2; then stage2; fi
fi
if $clusters; then
  CLUSTERS_UP=true
  if [[ -n $SIDE ]]; then
    stage "stages$SIDE start beside the clusters (output: $RUN/side.log, printed when they end)"
    lane_start side SIDE_PID side_lane
  fi
  clusters_built
  if $QUICK; then
    stage "quick: one cluster (up --workers 1), one move of its datastore there and back"
    timed "A. up --workers 1" scripts/kubeadm.sh up --workers 1
    timed "4 (A). install store, undo store (TestMoveStoreAndBack)" env QK_MOVE_RUN='TestMoveStoreAndBack$' scripts/kubeadm.sh move
  else
    stage "clusters: lane A (slot $SLOT_A: up checks, the store's moves) and lane B (the runtime, the operator, three control planes) side by side"
    if want 3; then
      timed "3 (A). up --lb --workers 1 killed with kill -9 once its nodes booted" test/kubeadm/crash.sh up --lb --workers 1
    fi
    if [[ -n $SLOT_B_ENV ]]; then
      stage "lane B starts (output: $RUN/B.log, printed when it ends)"
      lane_start B LANE_B_PID lane_b
    fi
    timed "A. up --lb --workers 1$(if want 3; then echo ' over the remains of the killed one (it must complete)'; fi)" scripts/kubeadm.sh up --lb --workers 1
    timed "A. up --lb --workers 1 again over the running cluster (up twice in a row)" scripts/kubeadm.sh up --lb --workers 1
    timed "A. smoke" scripts/kubeadm.sh smoke
    if want 4; then
      timed "4 (A). install/undo store, faults, upgrade, long life (scripts/kubeadm.sh move)" scripts/kubeadm.sh move
    fi
  fi
  timed "A. down" scripts/kubeadm.sh down
  timed "A. down again (idempotent)" scripts/kubeadm.sh down
  # Stage 5 on lane A once its cluster is down, while lane B's cluster still
  # runs (lane A ends minutes before lane B): the runtime's bridge, subnet,
  # cgroup parents and registry port are its own (scripts/critest/lib.sh),
  # and it removes everything it made, which the host comparison below
  # now checks too.
  if want 5; then stage5; fi
  lane_wait B LANE_B_PID
  CLUSTERS_UP=false
  stage "the host as it was before the clusters"
  e0=$(date +%s)
  test/kubeadm/snapshot.sh "$snap/after"
  test/kubeadm/compare.sh "$snap/before" "$snap/after"
  rm -rf "$snap"
  times_record "host compared with its snapshot" "$e0" "$(date +%s)" passed
fi
# Without a cluster stage, stage 5 runs here (with them, on lane A above).
if want 5 && ! $clusters; then stage5; fi
lane_wait side SIDE_PID
if want 6 && ! $clusters; then stage6; fi
built
RESULT=passed
stage "all stages passed"
n=0; for s in $STAGES; do n=$((n + 1)); done
echo "stages: $n passed, 0 failed"
