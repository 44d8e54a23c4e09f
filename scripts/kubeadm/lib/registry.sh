# shellcheck shell=bash
# registry.sh: the cluster's image registry. The nodes have no way out of
# this machine, so `up` serves the images it built (every tarball of
# $QK_STATE/images) from a registry on the host's bridge address
# ($QK_NODE_NET.1:$QK_REGISTRY_PORT, scripts/kubeadm/registry), and every
# node's runtimes use it as a mirror of each image's upstream registry:
# containerd through /etc/containerd/certs.d/HOST/hosts.toml, quantykube
# runtime through the mirrors of /etc/quantykube/runtime.toml. Images keep
# their upstream names; a node that lacks one pulls it as it would from a real
# registry (after a runtime move, a Deployment's pods coming back, the
# operator's host pods).
#
# Invariant: the registry's pid is recorded in $QK_STATE/host/registry before
# it starts, and `down` removes the record only once the process is gone.

QK_REGISTRY_PORT=${QK_REGISTRY_PORT:-5000}

registry_addr() { echo "$QK_NODE_NET.1:$QK_REGISTRY_PORT"; }

# registry_hosts prints the upstream registries of the images `up` builds.
registry_hosts() {
	local ref
	for ref in "registry.k8s.io/x" "$QK_WORKLOAD_IMAGE" "$QK_QUANTYKUBE_IMAGE"; do echo "${ref%%/*}"; done | sort -u
}

# registry_up: start the registry on the bridge address (net_up first) and
# wait until it serves every image.
registry_up() {
	local bin=$QK_CACHE/kubeadm/tools/registry ready=$QK_STATE/registry.ready
	(cd "$QK_ROOT" && CGO_ENABLED=0 go build -o "$bin" ./scripts/kubeadm/registry) || die "building scripts/kubeadm/registry failed (see above)"
	rm -f "$ready"
	mkdir -p "$QK_STATE/host"
	setsid "$bin" -addr "$(registry_addr)" -dir "$QK_STATE/images" -ready-file "$ready" </dev/null >"$QK_STATE/registry.log" 2>&1 &
	echo $! >"$QK_STATE/host/registry"
	wait_for 120 "the image registry on $(registry_addr)" test -f "$ready" ||
		die "the image registry did not start; see $QK_STATE/registry.log"
	log "image registry on $(registry_addr): $(tail -n 1 "$QK_STATE/registry.log")"
}

# registry_down stops the recorded registry (only if the pid is still ours).
registry_down() {
	local f=$QK_STATE/host/registry pid
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	if [[ -n $pid && -d /proc/$pid ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kubeadm/tools/registry"; then
		kill -9 "$pid" 2>/dev/null
		local i
		for i in $(seq 50); do [[ -d /proc/$pid ]] || break; sleep 0.1; done
	fi
	if [[ -z $pid || ! -d /proc/$pid ]] || ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kubeadm/tools/registry"; then
		rm -f "$f"
	else
		log "warning: the image registry (pid $pid) is still running"
	fi
}

# registry_node_files NAME: the node's mirror configuration for containerd
# and for quantykube runtime (written into its upper layer before boot).
registry_node_files() {
	local name=$1 h eps
	eps="\"http://$(registry_addr)\""
	for h in $(registry_hosts); do
		node_write "$name" "/etc/containerd/certs.d/$h/hosts.toml" <<EOF2
# Written by scripts/kubeadm.sh: $h is served by the harness's registry.
server = "https://$h"
[host."http://$(registry_addr)"]
  capabilities = ["pull", "resolve"]
EOF2
	done
	{
		echo "# Written by scripts/kubeadm.sh: images come from the harness's registry on the host."
		for h in $(registry_hosts); do
			printf '[mirrors."%s"]\nendpoints = [%s]\nskip_upstream = true\n' "$h" "$eps"
		done
	} | node_write "$name" /etc/quantykube/runtime.toml
}
