# shellcheck shell=bash
# cluster.sh: `up` — from nothing to a kubeadm cluster whose nodes are all
# Ready, whose control-plane pods run, with a Deployment running on every node.
#
# Invariant: everything `up` makes on the host is recorded in $QK_STATE before
# it is made (see host.sh, net.sh, node.sh), so `down` can remove it at any
# point; `up` on an existing cluster first takes it down.

kubectl_qk() { kubectl --kubeconfig "$QK_STATE/kubeconfig" "$@"; }

cmd_up() {
	require_host
	check_control_planes "$QK_CONTROL_PLANES"
	((QK_CONTROL_PLANES + QK_WORKERS <= 200)) || die "at most 200 nodes fit in $QK_NODE_NET.0/24 as laid out; use fewer"
	install_prereqs
	if [[ -d $QK_STATE ]]; then
		log "a cluster (or what is left of one) is in $QK_STATE: taking it down first"
		cmd_down
	fi
	check_net_free
	mkdir -p "$QK_STATE"
	echo $$ >"$QK_STATE/up.pid"
	local t0=$SECONDS
	ensure_template
	ensure_artifacts
	if lb_wanted; then ensure_lb_template; fi
	log "artifacts and template ready in $((SECONDS - t0))s"

	host_register
	if lb_wanted; then mapfile -t -O "${#QK_SYSCTLS[@]}" QK_SYSCTLS < <(ha_sysctls); fi
	set_sysctls
	mount_nspawn_run
	net_up
	registry_up
	QK_BINDS=(--bind-ro="${QK_BIN[kubelet]}:/usr/bin/kubelet" --bind-ro="${QK_BIN[kubeadm]}:/usr/bin/kubeadm"
		--bind-ro="${QK_BIN[crictl]}:/usr/bin/crictl" --bind-ro="$QK_STATE/images:/opt/quantykube/images")
	local names k=0 n
	mapfile -t names < <(node_names)
	if lb_wanted; then lb_boot; fi
	for n in "${names[@]}"; do
		node_boot "$n" "$k"
		k=$((k + 1))
	done
	for n in "${names[@]}"; do node_wait_booted "$n"; done
	if lb_wanted; then lb_wait; fi
	log "nodes booted: ${names[*]}$(lb_wanted && echo " and the load balancer $(lb_name) ($(lb_ip):$QK_LB_PORT)")"
	run_per_node import "${names[@]}"
	log "images imported"

	local cp1=${names[0]} token cert_key
	token=$(rand_lower 6).$(rand_lower 16)
	cert_key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	echo "$token" >"$QK_STATE/token"
	kubeadm_init "$cp1" "$token" "$cert_key"
	node_exec "$cp1" cat /etc/kubernetes/admin.conf >"$QK_STATE/kubeconfig.tmp" && mv "$QK_STATE/kubeconfig.tmp" "$QK_STATE/kubeconfig"
	log "kubeadm init done on $cp1"
	# Control planes join one at a time (each adds an etcd member, and etcd
	# takes one learner at a time); workers at once.
	for n in "${names[@]:1:QK_CONTROL_PLANES-1}"; do
		kubeadm_join "$n" "$token" "$cert_key"
		log "kubeadm join done on $n (control plane)"
	done
	QK_JOIN_TOKEN=$token QK_JOIN_CERT_KEY=$cert_key run_per_node join "${names[@]:QK_CONTROL_PLANES}"
	log "kubeadm join done"
	wait_cluster_ready "${#names[@]}"
	if lb_wanted; then
		wait_for "$QK_WAIT" "every API server UP behind $(lb_name)" lb_all_up "$(lb_name)" "$QK_CONTROL_PLANES" ||
			die "the load balancer does not see every API server ready: $(lb_servers "$(lb_name)" | tr '\n' ' ')"
		log "the load balancer $(lb_name) sees $QK_CONTROL_PLANES API servers UP"
	fi
	deploy_hello "${names[@]}"
	rm -f "$QK_STATE/up.pid"
	log "up: ${#names[@]} nodes Ready in $((SECONDS - t0))s"
	print_howto
}

# rand_lower N: N random characters of [a-z0-9] (no pipe is cut short, so pipefail stays quiet).
rand_lower() {
	local s=""
	while ((${#s} < $1)); do s+=$(head -c 64 /dev/urandom | LC_ALL=C tr -dc 'a-z0-9'); done
	echo "${s:0:$1}"
}

# run_per_node STEP NODE...: STEP (import|join) on every NODE at once; fails if any fails.
run_per_node() {
	local step=$1 n pids=() rc=0 p
	shift
	for n in "$@"; do
		(
			case $step in
			import) node_import_images "$n" "$(node_role "$n")" ;;
			join) kubeadm_join "$n" "$QK_JOIN_TOKEN" "$QK_JOIN_CERT_KEY" ;;
			esac
		) &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	((rc == 0)) || die "$step failed on at least one node (see above)"
}

node_role() { [[ $1 == "$QK_CLUSTER"-cp* ]] && echo control-plane || echo worker; }

# check_control_planes N: N is a control-plane count this harness makes:
# 1, or an odd number (stacked etcd keeps quorum through one failure only
# with 3; an even count adds a member and no fault tolerance).
check_control_planes() {
	[[ $1 =~ ^[0-9]+$ ]] || die "--control-planes needs a number, e.g. --control-planes 3"
	(($1 >= 1)) || die "--control-planes $1: at least 1 control plane is needed; use 1 or 3"
	(($1 == 1 || $1 % 2 == 1)) || die "--control-planes $1: stacked etcd wants an odd number of members (an even one tolerates no more failures than one fewer); use $(($1 - 1)) or $(($1 + 1))"
}

# kubeadm_init NODE TOKEN CERTKEY: kubeadm init on the first control-plane
# node. The controlPlaneEndpoint is the node itself, or the load balancer
# when there is one (more than one control plane).
kubeadm_init() {
	local n=$1 ip endpoint sans
	ip=$(cat "$(node_dir "$n")/ip")
	endpoint=$ip
	sans="\"$ip\", \"127.0.0.1\", \"localhost\""
	local timeouts=""
	if lb_wanted; then
		endpoint=$(lb_ip)
		sans+=", \"$(lb_ip)\""
		timeouts=$'\n'$(ha_timeouts)
	fi
	node_exec "$n" mkdir -p /etc/kubernetes/qk-patches
	node_exec "$n" sh -c 'cat >/etc/kubernetes/qk-patches/kube-apiserver+strategic.yaml' <<EOF2
# kube-apiserver hangs on SIGTERM until killed: stop it in 3 s, not 30.
spec:
  terminationGracePeriodSeconds: 3
EOF2
	node_exec "$n" sh -c 'cat >/etc/kubernetes/qk-kubeadm.yaml' <<EOF2
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: "$2"
  ttl: 24h0m0s
certificateKey: "$3"
localAPIEndpoint:
  advertiseAddress: $ip
  bindPort: 6443
nodeRegistration:
  name: $n
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: IfNotPresent
  ignorePreflightErrors: [SystemVerification]
  kubeletExtraArgs:
  - name: node-ip
    value: "$ip"
patches:
  directory: /etc/kubernetes/qk-patches$timeouts
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: $QK_CLUSTER
kubernetesVersion: $QK_K8S_VERSION
controlPlaneEndpoint: "$endpoint:6443"
networking:
  podSubnet: $QK_POD_NET.0.0/16
  serviceSubnet: $QK_SERVICE_SUBNET
etcd:
  local:
    imageTag: "$QK_ETCD_VERSION"
apiServer:
  certSANs: [$sans]
  extraArgs:
  - name: shutdown-watch-termination-grace-period
    value: 2s
$(kubelet_configuration)
---
# kube-proxy leaves the host's conntrack alone: nf_conntrack_max and
# hashsize are the whole machine's (kind does the same).
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF2
	local args=(--config /etc/kubernetes/qk-kubeadm.yaml)
	((QK_CONTROL_PLANES > 1)) && args+=(--upload-certs)
	node_exec "$n" kubeadm init "${args[@]}" >"$(node_dir "$n")/kubeadm.log" 2>&1 ||
		die "kubeadm init on $n failed; last lines of $(node_dir "$n")/kubeadm.log:
$(tail -n 15 "$(node_dir "$n")/kubeadm.log")"
}

# ha_timeouts: kubeadm's timeouts for a cluster behind the load balancer.
# Its API calls go through the LB, which sends nothing to an API server
# before its /readyz passes (later than the first requests it could serve),
# and a joining control plane waits for its new etcd member to start and be
# promoted: kubeadm's 1 min (API) and 2 min (etcd) failed on a machine
# loaded by other clusters (init: "could not bootstrap the admin user ...
# would exceed context deadline"; join: "the etcd member ... is not started").
ha_timeouts() {
	printf '%s\n' "timeouts:" "  kubernetesAPICall: 4m0s" "  etcdAPICall: 5m0s"
}

# kubelet_configuration: the KubeletConfiguration of every node (kubeadm
# uploads it to the kubelet-config ConfigMap; join and upgrade read it there).
# Eviction thresholds are absolute: this machine's disk is often under
# kubelet's default 15% free (nodefs/imagefs) and every node would be tainted
# disk-pressure; every hard signal is named, since one named signal drops
# the defaults of the others. Image GC is off for the same reason: the images
# are made on this machine, imported at boot, and a collected one costs a pull.
kubelet_configuration() {
	cat <<EOF2
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1Gi
  imagefs.available: 1Gi
  nodefs.inodesFree: 5%
  imagefs.inodesFree: 5%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF2
}

# kubeadm_join NODE TOKEN CERTKEY: join NODE as a worker, or as a control
# plane when its name says so (certificates come from the kubeadm-certs Secret),
# through the load balancer when there is one.
kubeadm_join() {
	local n=$1 ip cp_ip cp_part=""
	ip=$(cat "$(node_dir "$n")/ip")
	cp_ip=$(cat "$(node_dir "$QK_CLUSTER-cp1")/ip")
	if lb_wanted; then cp_ip=$(lb_ip); fi
	if [[ $(node_role "$n") == control-plane ]]; then
		cp_part="controlPlane:
  certificateKey: \"$3\"
  localAPIEndpoint:
    advertiseAddress: $ip
    bindPort: 6443
$(ha_timeouts)"
	fi
	node_exec "$n" sh -c 'mkdir -p /etc/kubernetes && cat >/etc/kubernetes/qk-kubeadm.yaml' <<EOF2
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    token: "$2"
    apiServerEndpoint: "$cp_ip:6443"
    unsafeSkipCAVerification: true
nodeRegistration:
  name: $n
  criSocket: unix:///run/containerd/containerd.sock
  imagePullPolicy: IfNotPresent
  ignorePreflightErrors: [SystemVerification]
  kubeletExtraArgs:
  - name: node-ip
    value: "$ip"
$cp_part
EOF2
	node_exec "$n" kubeadm join --config /etc/kubernetes/qk-kubeadm.yaml >"$(node_dir "$n")/kubeadm.log" 2>&1 ||
		die "kubeadm join on $n failed; last lines of $(node_dir "$n")/kubeadm.log:
$(tail -n 15 "$(node_dir "$n")/kubeadm.log")"
}

# wait_cluster_ready N: N nodes Ready and every control-plane pod Ready.
wait_cluster_ready() {
	local want=$1
	wait_for "$QK_WAIT" "$want nodes Ready" nodes_ready "$want" || {
		kubectl_qk get nodes -o wide >&2 || true
		die "nodes did not all become Ready; look with: scripts/kubeadm.sh exec NODE journalctl -u kubelet"
	}
	local pods=$((4 * QK_CONTROL_PLANES))
	wait_for "$QK_WAIT" "$pods control-plane pods Ready" cp_pods_ready "$pods" || {
		kubectl_qk -n kube-system get pods -o wide >&2 || true
		die "control-plane pods did not all become Ready"
	}
	# kubeadm's addons: kube-proxy on every node, CoreDNS (its 2 replicas)
	local a
	for a in daemonset/kube-proxy deployment/coredns; do
		kubectl_qk -n kube-system rollout status "$a" --timeout="${QK_WAIT}s" >/dev/null || {
			kubectl_qk -n kube-system get pods -o wide >&2 || true
			die "kube-system $a did not become ready; see: kubectl --kubeconfig $QK_STATE/kubeconfig -n kube-system logs $a"
		}
	done
	log "$want nodes Ready, $pods control-plane pods Ready, kube-proxy and CoreDNS ready"
}

nodes_ready() {
	local n
	n=$(kubectl_qk get nodes --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l)
	((n == $1))
}

cp_pods_ready() {
	local n
	n=$(kubectl_qk -n kube-system get pods -l tier=control-plane --no-headers 2>/dev/null | awk '$3=="Running" {split($2,a,"/"); if (a[1]==a[2]) c++} END {print c+0}')
	((n == $1))
}

# deploy_hello NODE...: a one-replica Deployment pinned to each node, so every
# node runs a workload pod; waits until all are available.
deploy_hello() {
	local n
	for n in "$@"; do
		hello_manifest "$n"
		echo "---"
	done | kubectl_qk apply -f - >/dev/null || die "creating the hello Deployments failed"
	for n in "$@"; do
		kubectl_qk rollout status "deployment/hello-$n" --timeout="${QK_WAIT}s" >/dev/null ||
			die "Deployment hello-$n did not become available; see: kubectl --kubeconfig $QK_STATE/kubeconfig describe pod -l app=hello-$n"
	done
	log "a Deployment runs on every node: $(printf 'hello-%s ' "$@")"
}

hello_manifest() {
	cat <<EOF2
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello-$1
  namespace: default
  labels: {app: hello-$1, quantykube.io/harness: hello}
spec:
  replicas: 1
  selector: {matchLabels: {app: hello-$1}}
  template:
    metadata:
      labels: {app: hello-$1, quantykube.io/harness: hello}
    spec:
      nodeSelector: {kubernetes.io/hostname: $1}
      # Only the control plane's taint: a cordoned or drained node must
      # not take its pod back (kubectl drain, the operator and the runtime
      # installer's "drained" check all rely on it).
      tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
      terminationGracePeriodSeconds: 1
      containers:
      - name: hello
        image: $QK_WORKLOAD_IMAGE
        imagePullPolicy: IfNotPresent
        command: ["/bin/sh", "-c", "echo hello from \$(hostname) on $1; exec sleep 2147483647"]
EOF2
}

print_howto() {
	cat <<EOF2

The cluster is up. Use it from this host with:
  export KUBECONFIG=$QK_STATE/kubeconfig
  kubectl get nodes -o wide
Enter a node:  scripts/kubeadm.sh exec $QK_CLUSTER-cp1 bash
Remove it all: scripts/kubeadm.sh down
EOF2
}

cmd_status() {
	[[ -f $QK_STATE/kubeconfig ]] || { echo "no cluster (state dir $QK_STATE has no kubeconfig)"; return 1; }
	echo "state: $QK_STATE"
	local n
	for n in $(state_nodes); do
		printf '%-16s %-15s %s\n' "$n" "$(cat "$(node_dir "$n")/ip" 2>/dev/null)" "$(node_leader "$n" >/dev/null && echo running || echo stopped)$(is_lb "$n" && echo ", load balancer on :$QK_LB_PORT")"
	done
	for n in $(state_nodes); do
		is_lb "$n" || continue
		echo "API servers behind $n (haproxy):"
		lb_servers "$n" | sed 's/^/  /'
		echo "API endpoint (kubeconfig): $(kubectl_qk config view -o jsonpath='{.clusters[0].cluster.server}')"
	done
	kubectl_qk get nodes -o wide
	echo "export KUBECONFIG=$QK_STATE/kubeconfig"
}
