# shellcheck shell=bash
# load.sh: `load N` fills the cluster with a realistic workload: N objects
# (ConfigMaps and Secrets of several sizes spread over a few namespaces) and,
# per namespace, a Deployment with one running pod per node. Idempotent: the
# objects have fixed names, so a second `load N` updates them in place.

QK_LOAD_NAMESPACES=${QK_LOAD_NAMESPACES:-3}

QK_LOAD_STREAMS=${QK_LOAD_STREAMS:-4}

cmd_load() {
	local total=$1 ns i size kind nodes t0=$SECONDS streams=$QK_LOAD_STREAMS
	[[ -f $QK_STATE/kubeconfig ]] || die "no cluster: run 'scripts/kubeadm.sh up' first"
	[[ $streams =~ ^[1-9][0-9]*$ ]] || die "QK_LOAD_STREAMS=$streams is not a positive number; set it to the kubectl processes to apply with, e.g. 4"
	nodes=$(kubectl_qk get nodes --no-headers | wc -l)
	local sizes=(100 1024 4096 16384 65536) # bytes of data per object, cycled
	rm -rf "$QK_STATE/load"
	mkdir -p "$QK_STATE/load"
	for ((ns = 1; ns <= QK_LOAD_NAMESPACES; ns++)); do
		printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: load-%d\n  labels: {quantykube.io/harness: load}\n---\n' "$ns"
	done >"$QK_STATE/load/namespaces.yaml"
	# Each object's data is a slice of one random blob (no process per
	# object: 5,000 objects in ~10 s, was ~30 s), at an offset of its own.
	# The objects are dealt round-robin into $streams files, one kubectl
	# each. More streams do not make it faster here: 5,000 objects took 235 s
	# with 3, 228 s with 16 and 260 s with 4 on the 3-control-plane cluster
	# (the spread is run-to-run noise), the 2 cores
	# busy (load average 18) with the API servers and etcd members, not with
	# kubectl's client-side limit (5 requests/s, bursts of 10, per process).
	local blob fds=() fd s
	blob=$(head -c 196608 /dev/urandom | base64 -w0)
	for ((s = 0; s < streams; s++)); do
		exec {fd}>"$QK_STATE/load/objects-$s.yaml"
		fds[s]=$fd
	done
	for ((i = 0; i < total; i++)); do
		ns=$((i % QK_LOAD_NAMESPACES + 1))
		size=${sizes[$((i % ${#sizes[@]}))]}
		if ((i % 3 == 2)); then kind=Secret; else kind=ConfigMap; fi
		load_object "$kind" "load-$ns" "obj-$i" "${blob:$(((i * 7919) % (${#blob} - size))):size}" >&"${fds[i % streams]}"
	done
	for ((s = 0; s < streams; s++)); do fd=${fds[s]}; exec {fd}>&-; done
	for ((ns = 1; ns <= QK_LOAD_NAMESPACES; ns++)); do load_deployment "load-$ns" "$nodes"; done >"$QK_STATE/load/deployments.yaml"
	log "load: applying $total objects and $QK_LOAD_NAMESPACES Deployments ($(du -sh "$QK_STATE/load" | cut -f1) of YAML) with $streams kubectl processes"
	# Namespaces first: the objects' applies would fail on a missing one.
	kubectl_qk apply --server-side --force-conflicts -f "$QK_STATE/load/namespaces.yaml" >/dev/null ||
		die "kubectl apply of $QK_STATE/load/namespaces.yaml failed"
	local pids=() p rc=0
	for ((s = 0; s < streams; s++)); do
		kubectl_qk apply --server-side --force-conflicts -f "$QK_STATE/load/objects-$s.yaml" >/dev/null &
		pids+=($!)
	done
	kubectl_qk apply --server-side --force-conflicts -f "$QK_STATE/load/deployments.yaml" >/dev/null &
	pids+=($!)
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	((rc == 0)) || die "kubectl apply of $QK_STATE/load/*.yaml failed"
	log "load: $total objects applied in $((SECONDS - t0))s"
	for ((ns = 1; ns <= QK_LOAD_NAMESPACES; ns++)); do
		kubectl_qk -n "load-$ns" rollout status deployment/spread --timeout="${QK_WAIT}s" >/dev/null ||
			die "Deployment load-$ns/spread did not become available"
	done
	log "load: $total objects, $QK_LOAD_NAMESPACES Deployments with $nodes pods each, in $((SECONDS - t0))s"
	kubectl_qk get pods -A -l quantykube.io/harness=load -o wide --no-headers | awk '{print $1, $2, $4, $8}' | column -t
}

# load_object KIND NS NAME DATA: one object carrying DATA.
load_object() {
	if [[ $1 == Secret ]]; then
		printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {quantykube.io/harness: load}\nstringData:\n  payload: "%s"\n---\n' "$3" "$2" "$4"
	else
		printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels: {quantykube.io/harness: load}\ndata:\n  payload: "%s"\n---\n' "$3" "$2" "$4"
	fi
}

# load_deployment NS REPLICAS: REPLICAS pods spread over the nodes (control planes included).
load_deployment() {
	cat <<EOF2
apiVersion: apps/v1
kind: Deployment
metadata:
  name: spread
  namespace: $1
  labels: {quantykube.io/harness: load}
spec:
  replicas: $2
  selector: {matchLabels: {app: spread}}
  template:
    metadata:
      labels: {app: spread, quantykube.io/harness: load}
    spec:
      # The control plane's taint only, and a soft spread: a drained node's
      # pods move to the others instead of coming back to it.
      tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 1
      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: ScheduleAnyway
        labelSelector: {matchLabels: {app: spread}}
      containers:
      - name: app
        image: $QK_WORKLOAD_IMAGE
        imagePullPolicy: IfNotPresent
        command: ["/bin/sh", "-c", "while true; do date; sleep 10; done"]
EOF2
	echo "---"
}
