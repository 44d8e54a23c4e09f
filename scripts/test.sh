#!/usr/bin/env bash
# test.sh — every test of the project, with real components (README's second command; .ci/run runs it).
#
# Stages; the first failure stops the run and its exit code is the script's. With a cluster stage
# (3, 4 or 7) selected, 3, 4 and 7 run on ONE shared cluster, the run's long pole, while 1, 2 and 6
# run beside it in a side lane at nice 10 (the cluster leaves a core idle much of the time); then 5.
# Without one: 1, 2, 5, then 6.
#   1. go vet, generated files up to date, unit tests of every package, the end-to-end store tests of
#      test/store (etcdctl 3.6, kill -9 under load, a real kube-apiserver v1.36.3 + kubectl) and the
#      operator's reconciler tests against a real kube-apiserver + etcd, in one `go test`
#   2. the Kubernetes storage suites (k8s.io/apiserver v0.37.2 etcd3 + cacher) against the store; then
#      the 3-member store: test/store's etcdctl, kill -9 and kube-apiserver tests on 3 members (stage 1 runs
#      the TestCluster* tests: partition, leader kill, membership), and etcd's tests/robustness
#      traffic (Kubernetes, EtcdPutDeleteLease) and validators with a member SIGKILLed every few seconds
#   3, 4 and 7 share ONE real kubeadm cluster (scripts/kubeadm.sh, systemd-nspawn nodes), in this order:
#      the host snapshotted; `up --lb --workers 1` (one control plane whose controlPlaneEndpoint is an
#      HAProxy node, and a worker) killed with kill -9 once its nodes booted (stage 3; test/kubeadm/crash.sh),
#      `up` again over the remains (it must complete), `up` again over the running cluster (up twice in
#      a row), smoke; then
#   4. install runtime / undo runtime on the worker and the control plane (scripts/kubeadm.sh node,
#      test/noderuntime) and install store / undo store (scripts/kubeadm.sh move, test/move), each with
#      a failure and a kill -9 at every step, and bad input; kubeadm upgrade on the moved cluster, a
#      manifest pointed back refused, undo after a long life on the store
#   7. back on etcd and containerd: the operator end to end (scripts/kubeadm.sh e2e, TestOperator):
#      5,000 objects, deploy/quantykube.yaml applied, the store and a labelled worker Moved then Undone
#      with the operator pod killed at every step, every resourceVersion kept, every pod Running; then
#      a worker with an injected fault: Failed within its deadline, rolled back
#   3. the cluster grown to 3 control planes behind the load balancer (scripts/kubeadm.sh grow
#      --control-planes 3: certificates uploaded again, joins through the LB, haproxy reloaded), smoke,
#      then scripts/kubeadm.sh e2e's TestOperatorHA (the same 5,000 objects, the store's HA move and undo
#      through the Installation, a Prober, a writer and watchers on the load balancer, the store's leader
#      killed mid-way, every resourceVersion compared);
#      then down, down again, and the host compared with its snapshot. A subset runs its own part of
#      that flow on the same kind of cluster (STAGES=3 alone: crash, up, up again, smoke, grow, smoke,
#      TestOperatorHA, which loads the objects first).
#   5. the runtime: critest v1.37.0 fully offline (scripts/critest.sh), kill -9 and restart of the
#      runtime with containers running (scripts/critest/restart.sh), a real kubelet on it
#      (scripts/critest/kubelet.sh)
#   6. bench/run.sh --quick: every benchmark workload once against the store, etcd and kine (a smoke
#      check that asserts that each ran, never a number; the full run writes docs/benchmarks.md)
# Every stage and step prints its start (time of day, time since the start); each step of the
# cluster, at its end, how long it took.
#
# Real binaries are built from the Go module proxy by scripts/deps.sh and cached under
# ${QK_CACHE:-<repo>/.cache}; the first run on a fresh machine spends most of its time there.
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
STAGES=${STAGES:-"1 2 3 4 5 6 7"}   # 3, 4, 7 on one cluster with 1, 2, 6 beside it, then 5; without a cluster stage 1, 2, 5, 6
CACHE=${QK_CACHE:-$ROOT/.cache}
T0=$SECONDS
mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
stage() { printf '\n=== %s (%s, +%s)\n' "$*" "$(date -u +%H:%M:%S)" "$(mmss $((SECONDS - T0)))"; }
# timed WHAT CMD...: a step: its start as stage prints it, CMD, then how long
# it took (or that it failed, and after how long; the run stops there). CMD
# must be a command, not a shell function (under `||` a function would run
# without set -e).
timed() {
  local what=$1 t0=$SECONDS rc=0
  shift
  stage "$what"
  "$@" || rc=$?
  if ((rc == 0)); then echo "--- $what: done in $(mmss $((SECONDS - t0)))"; else echo "--- $what: FAILED (exit $rc) after $(mmss $((SECONDS - t0)))"; exit "$rc"; fi
  side_check
}
# use_slot picks the first free cluster slot (bridge, node subnet, names, state
# dir) so a cluster left running by other work on this host is never touched.
use_slot() {
  if [[ -z ${QK_SLOT_PICKED:-} ]] && scripts/kubeadm.sh free-slot >/dev/null 2>&1; then
    eval "$(scripts/kubeadm.sh free-slot)"
    export QK_SLOT_PICKED=1
  fi
}
want() { [[ " $STAGES " == *" $1 "* ]]; }

stage "building quantykube and the real components"
mkdir -p "$CACHE/bin"
# The clusters' node templates (debootstrap: ~2.5 min cold, mostly download
# and unpack) and the load balancer's are built in the background from the
# start, beside the Kubernetes build below; the images once deps.sh has
# every binary (after the prefetch below). Stage 3 then boots its nodes at
# once instead of building them first. Under the template lock and
# deps.sh's: an `up` that comes first waits for them.
clusters=false
if want 3 || want 4 || want 7; then
  clusters=true
  scripts/kubeadm.sh prereqs   # apt here, not beside another apt-get in the background
  # The host's snapshot, compared after the clusters' last `down`, is taken
  # before anything starts in the background: a template build under way
  # has debootstrap's /proc mounted in its rootfs (CI, 6 December: the
  # snapshot caught it, the comparison then failed on a mount that was gone).
  use_slot
  snap=$(mktemp -d /tmp/qk-ci-host.XXXXXX)
  scripts/kubeadm.sh down >/dev/null 2>&1 || true
  test/kubeadm/snapshot.sh "$snap/before"
  QK_CONTROL_PLANES=3 scripts/kubeadm.sh templates >"$CACHE/kubeadm-templates.log" 2>&1 &
fi

go build -buildvcs=false -ldflags "-s -w" -o "$CACHE/bin/quantykube" ./cmd/quantykube
export QK_STORE_BIN=$CACHE/bin/quantykube
eval "$(scripts/deps.sh env etcd etcdctl etcdutl kube-apiserver kube-controller-manager)"
export QK_KUBECTL=${QK_KUBECTL:-$(command -v kubectl || echo /usr/bin/kubectl)}
# The components later stages need are built in the background from here
# on, beside stage 1 (the side lane at nice 10 when a cluster stage runs, so
# these come first; on a cold machine they are ~15 min): first what the
# clusters need (the rest of Kubernetes, CoreDNS, crictl, then the images:
# the cluster's first `up` waits for those), then the peers and tools of
# stages 5 and 6. deps.sh builds one at a time
# under its lock, so a stage that asks for one meanwhile waits for it, and a
# failed build here is retried, and reported, by the stage that needs it.
rm -f "$CACHE/.prefetch-clusters"
(
  scripts/deps.sh path kube-scheduler kubelet kubeadm kube-proxy coredns crictl >/dev/null
  if $clusters; then QK_CONTROL_PLANES=3 scripts/kubeadm.sh build; fi
  touch "$CACHE/.prefetch-clusters"
  scripts/deps.sh path etcd-benchmark kine critest runc cni-plugins >/dev/null
) >"$CACHE/prefetch.log" 2>&1 &
PREFETCH=$!
# clusters_built waits until the prefetch has built what the clusters need
# (or ended); built waits for all of it. A failure is reported, and what it
# missed is built (or its failure shown) by the stage that needs it.
clusters_built() {
  while [[ ! -e $CACHE/.prefetch-clusters ]] && kill -0 "$PREFETCH" 2>/dev/null; do sleep 2; done
  [[ -e $CACHE/.prefetch-clusters ]] || { echo "the background build of the clusters' parts failed (up builds what is missing):"; tail -n 20 "$CACHE/prefetch.log"; }
}
built() {
  [[ -n $PREFETCH ]] || return 0
  wait "$PREFETCH" || { echo "the background build of the components failed (the stages build what is missing):"; tail -n 20 "$CACHE/prefetch.log"; }
  PREFETCH=
}
stage1() {
  stage "1. go vet, unit tests and end-to-end store tests"
  go vet ./...
  scripts/generate.sh check   # the CRD, RBAC and deepcopy code match the Go types
  go test -count=1 -timeout 30m ./...
}
stage2() {
  stage "2. Kubernetes storage suites against quantykube store"
  test/k8s-storage/run.sh --store-bin "$QK_STORE_BIN"
  stage "2b. the replicated store: test/store on 3 members (etcdctl, kill -9, kube-apiserver on every endpoint), etcd's robustness traffic with a member killed every few seconds"
  QK_STORE_MEMBERS=3 go test -count=1 -timeout 12m -run 'TestEtcdctl|TestKillNine$|TestKubeAPIServer$' ./test/store/
  test/robustness/run.sh --server store --bin "$QK_STORE_BIN"
}
stage6() {
  stage "6. benchmarks, quick: every workload ran on every store"
  bench/run.sh --quick
}
# The side lane: stages 1, 2 and 6 (processes on the host's loopback only:
# no link, rule, mount, cgroup or sysctl of the host changes, so the
# cluster's host comparison is not disturbed) run beside the cluster, from
# its first `up` on, when a cluster stage is selected; else in the order
# 1, 2, then 6 after 5. The cluster is the run's long pole and leaves a
# core idle much of the time (API servers restarting, kubelet syncing,
# nodes draining); the lane runs at nice 10, so the cluster's processes,
# whose steps wait against deadlines, come first (the suites have none that
# tight). A failure in the lane stops the run at the cluster's next step.
SIDE=
if $clusters; then
  for s in 1 2 6; do if want "$s"; then SIDE+=" $s"; fi; done
fi
SIDE_PID=
side_start() {
  [[ -n $SIDE ]] || return 0
  stage "stages$SIDE start beside the cluster (output: $CACHE/side.log, printed when they end)"
  (
    renice -n 10 -p "$BASHPID" >/dev/null
    for s in $SIDE; do "stage$s"; done
  ) >"$CACHE/side.log" 2>&1 &
  SIDE_PID=$!
}
side_wait() {
  [[ -n $SIDE_PID ]] || return 0
  local rc=0
  wait "$SIDE_PID" || rc=$?
  SIDE_PID=
  echo "--- stages$SIDE, beside the cluster ($CACHE/side.log):"
  cat "$CACHE/side.log"
  ((rc == 0)) || { echo "stages$SIDE failed (exit $rc)"; exit "$rc"; }
  stage "stages$SIDE passed"
}
# side_check ends the run if the side lane has failed (timed calls it after
# every cluster step); a lane that passed is reported as it ends.
side_check() {
  [[ -n $SIDE_PID ]] || return 0
  if kill -0 "$SIDE_PID" 2>/dev/null; then return 0; fi
  side_wait
}
if ! $clusters; then
  if want 1; then stage1; fi
  if want 2; then stage2; fi
fi
# Stages 3, 4 and 7 share one cluster, one control plane behind the load
# balancer and a worker (`up --lb --workers 1`): stage 3's checks of `up`
# (killed with kill -9 and run again over the remains; up twice in a row)
# are its ups, stages 4 and 7 run on it, then stage 3 grows it to three
# control planes for TestOperatorHA. One snapshot of the host before the
# run's first background build (above), compared after the `down` (what down_test.sh checks, on the
# cluster every test ran on). Stage 4's tests and stage 7's leave the
# cluster on etcd and containerd, every pod Running: the state the next
# starts from. Stage 5 comes after the comparison (its runtime makes
# cgroups, mounts and netns of its own on the host).
if $clusters; then
  trap 'if [[ -n $SIDE_PID ]]; then kill -- "$SIDE_PID" 2>/dev/null || true; fi; scripts/kubeadm.sh down >/dev/null 2>&1 || true' EXIT
  side_start
  clusters_built
  stage "3/4/7. one real cluster: one control plane behind the load balancer (up --lb) and a worker, for stage 3's checks of up, the moves (4) and the operator (7); then grown to three control planes (3)"
  if want 3; then
    timed "3. up --lb --workers 1 killed with kill -9 once its nodes booted" test/kubeadm/crash.sh up --lb --workers 1
  fi
  timed "3/4/7. up --lb --workers 1$(if want 3; then echo ' over the remains of the killed one (it must complete)'; fi)" scripts/kubeadm.sh up --lb --workers 1
  timed "3/4/7. up --lb --workers 1 again over the running cluster (up twice in a row)" scripts/kubeadm.sh up --lb --workers 1
  timed "3/4/7. smoke" scripts/kubeadm.sh smoke
  if want 4; then
    stage "4. install/undo runtime and install/undo store on the cluster, with faults"
    timed "4. install/undo runtime (scripts/kubeadm.sh node)" scripts/kubeadm.sh node   # first: its tests want a worker with only their own pods
    timed "4. install/undo store (scripts/kubeadm.sh move)" scripts/kubeadm.sh move
  fi
  if want 7; then
    timed "7. the operator end to end: move and undo through one Installation, killed at every step, a failing node (TestOperator)" scripts/kubeadm.sh e2e
  fi
  if want 3; then
    timed "3. grow --control-planes 3: two control planes join through the load balancer" scripts/kubeadm.sh grow --control-planes 3
    timed "3. smoke (three control planes, every API server UP behind the load balancer)" scripts/kubeadm.sh smoke
    timed "3. the operator's HA move and undo (TestOperatorHA)" scripts/kubeadm.sh e2e
  fi
  stage "3/4/7. down, and the host as it was before up"
  timed "3/4/7. down" scripts/kubeadm.sh down
  timed "3/4/7. down again (idempotent)" scripts/kubeadm.sh down
  trap 'if [[ -n $SIDE_PID ]]; then kill -- "$SIDE_PID" 2>/dev/null || true; fi' EXIT
  test/kubeadm/snapshot.sh "$snap/after"
  test/kubeadm/compare.sh "$snap/before" "$snap/after"
  rm -rf "$snap"
fi
# Stage 5 after the host comparison (its runtime makes cgroups, mounts, netns
# and links of its own on the host), while the side lane may still run.
if want 5; then
  stage "5. the runtime: critest offline, restart under load, kubelet"
  export QK_RUNTIME_BIN=$QK_STORE_BIN
  scripts/critest.sh
  scripts/critest/restart.sh
  scripts/critest/kubelet.sh
fi
side_wait
trap - EXIT
if want 6 && ! $clusters; then stage6; fi
built
stage "all stages passed"
n=0; for s in $STAGES; do n=$((n + 1)); done
echo "stages: $n passed, 0 failed"
