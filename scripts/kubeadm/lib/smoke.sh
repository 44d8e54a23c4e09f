# shellcheck shell=bash
# smoke.sh: the cluster works from the host: nodes listed and Ready, a pod
# runs on each node, `kubectl exec` and `kubectl logs` reach each of them,
# pods reach each other, a ClusterIP Service answers from a pod on another
# node (kube-proxy), and cluster DNS resolves kubernetes.default and that
# Service (CoreDNS).
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
	smoke_lb
	marker=smoke-$(rand_lower 8)
	{
		for n in "${nodes[@]}"; do smoke_pod "$n" "$marker"; echo "---"; done
		smoke_service "${nodes[0]}"
	} | kubectl_qk apply -f - >/dev/null
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
	smoke_services "${nodes[0]}" "${nodes[${#nodes[@]} - 1]}" "$marker"
	kubectl_qk delete pod,service -l quantykube.io/harness=smoke --wait=false >/dev/null 2>&1 || true
	echo "smoke: $pass passed, $fail failed"
	((fail == 0))
}

# smoke_lb: with a load balancer, the kubeconfig goes through it and haproxy
# sees every control plane's API server UP (nothing without one).
smoke_lb() {
	local lb cps
	for lb in $(state_nodes); do
		is_lb "$lb" || continue
		cps=$(state_nodes | grep -c -- '-cp[0-9]*$')
		check "kubeconfig's server is the load balancer $lb ($(cat "$(node_dir "$lb")/ip"):$QK_LB_PORT)" \
			test "$(kubectl_qk config view -o jsonpath='{.clusters[0].cluster.server}')" = "https://$(cat "$(node_dir "$lb")/ip"):$QK_LB_PORT"
		check "load balancer $lb: $cps API servers UP (/readyz)" lb_all_up "$lb" "$cps"
	done
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
  labels: {quantykube.io/harness: smoke, quantykube.io/smoke-node: $1}
spec:
  nodeName: $1
  tolerations: [{operator: Exists}]
  terminationGracePeriodSeconds: 1
  containers:
  - name: smoke
    image: $QK_WORKLOAD_IMAGE
    imagePullPolicy: IfNotPresent
    command: ["/bin/sh", "-c", "echo $2 >/etc/marker; mkdir /tmp/www; echo $2 >/tmp/www/index.html; httpd -p 8080 -h /tmp/www; echo $2 on $1; exec sleep 2147483647"]
EOF2
}

# smoke_service SERVERNODE: Service "smoke" (ClusterIP, port 8080) in front
# of the smoke pod on SERVERNODE (its busybox httpd serves the marker).
smoke_service() {
	cat <<EOF2
apiVersion: v1
kind: Service
metadata:
  name: smoke
  namespace: default
  labels: {quantykube.io/harness: smoke}
spec:
  type: ClusterIP
  selector: {quantykube.io/smoke-node: $1}
  ports: [{port: 8080, targetPort: 8080, protocol: TCP}]
EOF2
}

# smoke_services SERVERNODE CLIENTNODE MARKER: the Service's ClusterIP from the
# pod on CLIENTNODE (another node when there are two), then cluster DNS from it.
smoke_services() {
	local srv=$1 cli=smoke-$2 marker=$3 cip
	cip=$(kubectl_qk get service smoke -o jsonpath='{.spec.clusterIP}')
	check "kube-proxy DaemonSet ready on every node" kubectl_qk -n kube-system rollout status daemonset/kube-proxy --timeout=60s
	check "ClusterIP Service smoke ($cip:8080) answers from a pod on $2 (backend on $srv)" \
		smoke_retry 20 smoke_body_is "$cli" "$cip:8080" "$marker"
	check "CoreDNS Deployment available" kubectl_qk -n kube-system rollout status deployment/coredns --timeout=60s
	check "cluster DNS: kubernetes.default.svc.cluster.local is $(kubectl_qk get service kubernetes -o jsonpath='{.spec.clusterIP}') from $cli" \
		smoke_retry 20 smoke_resolves "$cli" kubernetes.default.svc.cluster.local "$(kubectl_qk get service kubernetes -o jsonpath='{.spec.clusterIP}')"
	check "cluster DNS: smoke.default.svc.cluster.local is $cip from $cli" \
		smoke_retry 20 smoke_resolves "$cli" smoke.default.svc.cluster.local "$cip"
	check "the Service by its short name (smoke:8080, resolv.conf search path) from $cli" \
		smoke_retry 20 smoke_body_is "$cli" "smoke:8080" "$marker"
}

# smoke_retry N CMD...: CMD until it succeeds, N times a second apart
# (iptables rules and DNS records follow the Service within seconds).
smoke_retry() {
	local n=$1 i
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 1
	done
	return 1
}

# smoke_body_is POD HOST:PORT BODY: an HTTP GET from POD answers BODY
# (busybox nc with a 3 s timeout: Debian's static busybox wget segfaults on -T).
smoke_body_is() {
	[[ $(kubectl_qk exec "$1" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 ${2%:*} ${2##*:}" 2>/dev/null | tail -n 1) == "$3" ]]
}

# smoke_resolves POD NAME IP: busybox nslookup in POD (its resolv.conf is the
# cluster's: nameserver = the kube-dns Service) prints IP for NAME.
smoke_resolves() { kubectl_qk exec "$1" -- nslookup "$2" 2>/dev/null | grep -qE "^Address( 1)?:[[:space:]]*$3([[:space:]]|\$)"; }
