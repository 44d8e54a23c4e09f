# shellcheck shell=bash
# smoke.sh: the cluster works from the host: nodes listed and Ready, a pod
# runs on each node, `kubectl exec` and `kubectl logs` reach each of them.
# Prints one line per check and a closing "N passed, N failed".

cmd_smoke() {
	[[ -f $QK_STATE/kubeconfig ]] || die "no cluster: run 'scripts/kubeadm.sh up' first"
	local pass=0 fail=0 n nodes marker
	check() { # check WHAT CMD...
		local what=$1
		shift
		if "$@" >/dev/null 2>&1; then pass=$((pass + 1)); echo "ok   $what"; else fail=$((fail + 1)); echo "FAIL $what"; fi
	}
	kubectl_qk get nodes -o wide
	mapfile -t nodes < <(kubectl_qk get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
	check "nodes listed (${#nodes[@]})" test "${#nodes[@]}" -ge 1
	for n in "${nodes[@]}"; do
		check "node $n Ready" nodes_named_ready "$n"
	done
	marker=smoke-$(rand_lower 8)
	for n in "${nodes[@]}"; do smoke_pod "$n" "$marker"; echo "---"; done | kubectl_qk apply -f - >/dev/null
	for n in "${nodes[@]}"; do
		check "pod smoke-$n Ready on $n" kubectl_qk wait --for=condition=Ready "pod/smoke-$n" --timeout=120s
		check "pod smoke-$n runs on $n" test "$(kubectl_qk get pod "smoke-$n" -o jsonpath='{.spec.nodeName}')" = "$n"
		check "kubectl exec into smoke-$n" test "$(kubectl_qk exec "smoke-$n" -- cat /etc/marker 2>/dev/null)" = "$marker"
		check "kubectl logs of smoke-$n" smoke_logs_have "smoke-$n" "$marker on $n"
	done
	if [[ ${#nodes[@]} -ge 2 ]]; then
		local ip
		ip=$(kubectl_qk get pod "smoke-${nodes[1]}" -o jsonpath='{.status.podIP}')
		check "pod on ${nodes[0]} reaches pod on ${nodes[1]} ($ip)" kubectl_qk exec "smoke-${nodes[0]}" -- ping -c1 -W3 "$ip"
	fi
	kubectl_qk delete pod -l quantykube.io/harness=smoke --wait=false >/dev/null 2>&1 || true
	echo "smoke: $pass passed, $fail failed"
	((fail == 0))
}

nodes_named_ready() {
	[[ $(kubectl_qk get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}

smoke_logs_have() {
	local i
	for i in 1 2 3 4 5; do
		kubectl_qk logs "$1" 2>/dev/null | grep -qF "$2" && return 0
		sleep 1
	done
	return 1
}

smoke_pod() {
	cat <<EOF2
apiVersion: v1
kind: Pod
metadata:
  name: smoke-$1
  namespace: default
  labels: {quantykube.io/harness: smoke}
spec:
  nodeName: $1
  tolerations: [{operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
  - name: smoke
    image: $QK_WORKLOAD_IMAGE
    imagePullPolicy: IfNotPresent
    command: ["/bin/sh", "-c", "echo $2 >/etc/marker; echo $2 on $1; exec sleep 2147483647"]
EOF2
}
