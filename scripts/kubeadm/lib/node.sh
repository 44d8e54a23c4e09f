# shellcheck shell=bash
# node.sh: one node = one `systemd-nspawn -b` container with systemd as PID 1,
# booted from the shared template through an overlay, in its own cgroups,
# with a static address on the host bridge.
#
# Invariants: the node's directory ($QK_STATE/nodes/NAME) exists before any
# host resource of the node is made, and lists every cgroup directory it made
# (cgroups), so `down` can always find and remove them; nothing of a node lives
# outside that directory except its cgroups and its veth (which dies with it).

node_dir() { echo "$QK_STATE/nodes/$1"; }

# node_cgroups_make NAME: a cgroup for the node below this process's own
# cgroup in every hierarchy (pitfall 7), under a cluster level qk-CLUSTER;
# records the leaves in the node's cgroups file and a newly made cluster
# level in host/cgroups, before making them.
node_cgroups_make() {
	local name=$1 dir rec line ctrls path mnt base d
	dir=$(node_dir "$name")
	rec=$dir/cgroups
	: >"$rec"
	while IFS= read -r line; do
		ctrls=${line#*:}; ctrls=${ctrls%%:*}; path=${line#*:*:}
		case $ctrls in
		"") mnt=/sys/fs/cgroup/unified ;;
		name=systemd) mnt=/sys/fs/cgroup/systemd ;;
		*) mnt=/sys/fs/cgroup/$ctrls ;;
		esac
		[[ -d $mnt ]] || continue
		base=${mnt}${path%/}
		for d in "$base/qk-$QK_CLUSTER" "$base/qk-$QK_CLUSTER/$name"; do
			if [[ ! -d $d ]]; then
				# the cluster's own level is the host's to remove, the leaf the node's
				if [[ $d == */qk-$QK_CLUSTER ]]; then echo "$d" >>"$QK_STATE/host/cgroups"; else echo "$d" >>"$rec"; fi
				mkdir "$d" || die "mkdir cgroup $d failed"
			fi
			if [[ $ctrls == cpuset ]]; then
				cat "$(dirname "$d")/cpuset.cpus" >"$d/cpuset.cpus"
				cat "$(dirname "$d")/cpuset.mems" >"$d/cpuset.mems"
			fi
		done
	done </proc/self/cgroup
}

# node_leader NAME prints the host pid of the node's PID 1 (systemd), or fails.
node_leader() {
	local pid c
	pid=$(cat "$(node_dir "$1")/pid" 2>/dev/null) || return 1
	[[ -d /proc/$pid ]] || return 1
	for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
		if [[ $(awk '/^NSpid:/{print $NF}' /proc/"$c"/status 2>/dev/null) == 1 ]]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

# node_exec NAME CMD...: CMD as root in all of the node's namespaces.
node_exec() {
	local name=$1 leader
	shift
	leader=$(node_leader "$name") || die "node $name is not running (see $(node_dir "$name")/console.log)"
	nsenter -t "$leader" -a -- /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root TERM="${TERM:-dumb}" CONTAINER_RUNTIME_ENDPOINT=unix:///run/containerd/containerd.sock "$@"
}

# node_write NAME PATH: stdin becomes PATH in the node's upper layer (before boot).
node_write() {
	local f
	f=$(node_dir "$1")/upper$2
	mkdir -p "$(dirname "$f")"
	cat >"$f.tmp" && mv "$f.tmp" "$f"
}

# node_files NAME INDEX: the node's own configuration, written into its upper
# layer: address and routes to the other nodes' pod subnets, CNI, containerd.
node_files() {
	local name=$1 k=$2 ip pod n j routes=""
	ip=$(node_ip "$k")
	pod=$(node_podcidr "$k")
	while read -r n j; do
		if ((j != k)); then
			routes+=$'\n'"[Route]"$'\n'"Destination=$(node_podcidr "$j")"$'\n'"Gateway=$(node_ip "$j")"$'\n'
		fi
	done < <(node_layout)
	# kube-proxy's DaemonSet mounts hostPath /lib/modules (no type: it must
	# exist); nodes have no kernel modules of their own, so it stays empty.
	mkdir -p "$(node_dir "$name")/upper/usr/lib/modules"
	node_write "$name" /etc/systemd/network/80-container-host0.network <<EOF2
[Match]
Virtualization=container
Name=host0

[Network]
Address=$ip/24
Gateway=$QK_NODE_NET.1
LinkLocalAddressing=no
IPv6AcceptRA=no
$routes
EOF2
	{
		echo "127.0.0.1 localhost"
		while read -r n j; do echo "$(node_ip "$j") $n"; done < <(node_layout)
		if lb_wanted; then echo "$(lb_ip) $(lb_name)"; fi
	} | node_write "$name" /etc/hosts
	echo "nameserver $QK_NODE_NET.1" | node_write "$name" /etc/resolv.conf
	node_write "$name" /etc/cni/net.d/10-quantykube.conflist <<EOF2
{
  "cniVersion": "1.0.0",
  "name": "quantykube",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$pod" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    }
  ]
}
EOF2
	node_write "$name" /etc/containerd/config.toml <<EOF2
# Written by scripts/kubeadm.sh for node $name.
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:$QK_PAUSE_TAG"
  # root here lacks CAP_SYS_RESOURCE: never ask runc for a lower oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
EOF2
	registry_node_files "$name"
	echo "$ip" >"$(node_dir "$name")/ip"
	echo "$pod" >"$(node_dir "$name")/podcidr"
}

# A node's INDEX places it: address .10+INDEX of the nodes' /24, pod subnet
# .INDEX+1.0/24 of the pods' /16. Two nodes of a cluster never share one.
node_ip() { echo "$QK_NODE_NET.$((10 + $1))"; }
node_podcidr() { echo "$QK_POD_NET.$(($1 + 1)).0/24"; }
# QK_MAX_INDEX: the highest index that fits (.254 and .255.0/24).
QK_MAX_INDEX=244

# node_layout prints "NAME INDEX" for every Kubernetes node of the cluster
# being made, the list node_files writes routes and /etc/hosts from: `up`'s
# shape in boot order (control planes first, then workers: node_names), or
# QK_LAYOUT when set (grow: the running nodes' own indexes and the new ones').
node_layout() {
	if [[ -n ${QK_LAYOUT:-} ]]; then
		printf '%s\n' "$QK_LAYOUT"
		return
	fi
	local n j=0
	for n in $(node_names); do
		echo "$n $j"
		j=$((j + 1))
	done
}

# state_layout prints "NAME INDEX" for every Kubernetes node in the state dir
# with a recorded address (the LB is not one: it has no index).
state_layout() {
	local n ip
	for n in $(state_nodes); do
		is_lb "$n" && continue
		ip=$(cat "$(node_dir "$n")/ip" 2>/dev/null) || continue
		echo "$n $((${ip##*.} - 10))"
	done
}

# node_boot NAME INDEX: make the node's directories, cgroups and files, and
# start systemd-nspawn in the background. QK_BINDS holds extra --bind-ro args.
node_boot() {
	local name=$1 k=$2 dir cg
	dir=$(node_dir "$name")
	mkdir -p "$dir/upper" "$dir/containerd" "$dir/runtime" "$QK_STATE/host"
	node_cgroups_make "$name"
	node_files "$name" "$k"
	local cgs=()
	while read -r cg; do [[ -n $cg ]] && cgs+=("$cg"); done < <(cgroup_leaves "$name")
	# The launcher moves itself into the node's cgroups, then becomes nspawn.
	setsid bash -c 'for c in "${@:2:$1}"; do echo $$ >"$c/cgroup.procs" || exit 1; done; shift $(($1 + 1)); exec "$@"' \
		launcher "${#cgs[@]}" "${cgs[@]}" \
		systemd-nspawn -b -D "$QK_TEMPLATE" --overlay="$QK_TEMPLATE:$dir/upper:/" -M "$name" --hostname="$name" \
		--uuid="$(cat /proc/sys/kernel/random/uuid)" --register=no --keep-unit --capability=all \
		--system-call-filter='add_key keyctl request_key' --network-bridge="$QK_BRIDGE" \
		--bind="$dir/containerd:/var/lib/containerd" --bind="$dir/runtime:/var/lib/quantykube/runtime" --bind-ro=/dev/kmsg "${QK_BINDS[@]}" \
		--resolv-conf=off --timezone=off --console=pipe \
		</dev/null >"$dir/console.log" 2>&1 &
	echo $! >"$dir/pid"
}

# cgroup_leaves NAME: the node's own cgroup in every hierarchy.
cgroup_leaves() {
	local line ctrls path mnt
	while IFS= read -r line; do
		ctrls=${line#*:}; ctrls=${ctrls%%:*}; path=${line#*:*:}
		case $ctrls in
		"") mnt=/sys/fs/cgroup/unified ;;
		name=systemd) mnt=/sys/fs/cgroup/systemd ;;
		*) mnt=/sys/fs/cgroup/$ctrls ;;
		esac
		[[ -d $mnt ]] && echo "${mnt}${path%/}/qk-$QK_CLUSTER/$1"
	done </proc/self/cgroup
}

# node_wait_booted NAME: until systemd in the node reports running (or degraded).
node_wait_booted() {
	local name=$1
	wait_for 60 "node $name to start" node_leader "$name" || die "node $name did not start; see $(node_dir "$name")/console.log"
	wait_for 90 "node $name to boot" node_booted "$name" ||
		die "node $name did not finish booting; see $(node_dir "$name")/console.log and 'scripts/kubeadm.sh exec $name systemctl --failed'"
}

node_booted() {
	local s
	s=$(node_exec "$1" systemctl is-system-running 2>/dev/null) || true
	[[ $s == running || $s == degraded ]]
}

# node_kill NAME: stop the node at once. Killing the PID-1 of its PID
# namespace kills every process in it and below it (pods included); its mount
# and network namespaces, and with them the overlay, the binds and the veth, go
# when the last process is gone. Then its cgroups are emptied and removed.
node_kill() {
	local name=$1 dir pid leader cg p
	dir=$(node_dir "$name")
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	leader=$(node_leader "$name" 2>/dev/null || true)
	if [[ -n $leader ]]; then kill -9 "$leader" 2>/dev/null || true; fi
	if [[ -n $pid && -d /proc/$pid && $(cat /proc/"$pid"/comm 2>/dev/null) == systemd-nspawn ]]; then
		kill -9 "$pid" 2>/dev/null || true
	fi
	if [[ -f $dir/cgroups ]]; then
		# anything left in the node's cgroups (a crash may leave a half-made node)
		for cg in $(sort -r "$dir/cgroups"); do
			[[ -d $cg ]] || continue
			for p in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		done
		local t0=$SECONDS
		for cg in $(sort -r "$dir/cgroups"); do
			[[ -d $cg ]] || continue
			until find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null; [[ ! -d $cg ]]; do
				((SECONDS - t0 < 20)) || { log "warning: cgroup $cg still busy"; break; }
				sleep 0.2
			done
		done
	fi
}
