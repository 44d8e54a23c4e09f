# shellcheck shell=bash
# lb.sh: the load balancer of a cluster with more than one control plane, as
# kubeadm's HA guide describes it: HAProxy (Debian's package) in TCP mode on
# LB:6443, in front of every control plane's kube-apiserver, each checked by
# an HTTPS GET of /readyz. kubeadm's controlPlaneEndpoint, every join and the
# host's kubeconfig point at it. `up --lb` (QK_LB=1) puts it in front of a
# single control plane too, as kubeadm's docs advise for a control plane that
# may become HA later: `grow` needs that endpoint (kubeadm joins no control
# plane to a cluster whose endpoint is one node's own address).
#
# The LB is a node like the others (a `systemd-nspawn -b` container on the
# bridge, in $QK_STATE/nodes/$QK_CLUSTER-lb, so `down`, `exec` and `status`
# handle it as any node), booted from its own small template (systemd,
# iproute2, haproxy, socat): the Kubernetes nodes' template is not changed by
# it, and the host gets nothing but what every node already costs.
#
# Invariants: a one-control-plane cluster has no LB and no trace of one unless
# asked with --lb (without it, its nodes, files and kubeconfig are what they
# were before the LB existed); the LB node's directory holds a file `lb`,
# which tells it from a Kubernetes node; haproxy's backends are the control
# planes that have joined (up lists its own at once; grow adds each one
# after its join).

QK_LB_PACKAGES=systemd,systemd-sysv,dbus,iproute2,procps,haproxy,socat
QK_LB_PORT=${QK_LB_PORT:-6443}
QK_LB=${QK_LB:-0} # 1: an LB even in front of one control plane (up --lb)
[[ $QK_LB == [01] ]] || { echo "kubeadm.sh: QK_LB=$QK_LB: want 0 or 1 (1 = a load balancer in front of one control plane too, as up --lb)" >&2; exit 1; }

lb_name() { echo "$QK_CLUSTER-lb"; }
# The LB's address: .2 of the nodes' /24 (the host is .1, nodes start at .10).
lb_ip() { echo "$QK_NODE_NET.2"; }
# lb_wanted: this `up` makes an LB (more than one control plane, or --lb).
lb_wanted() { ((QK_CONTROL_PLANES > 1 || QK_LB == 1)); }
# is_lb NAME: NAME is the LB node of the state dir.
is_lb() { [[ -e $(node_dir "$1")/lb ]]; }

lb_template_key() {
	{
		echo "$QK_DEBIAN_SUITE $QK_LB_PACKAGES"
		cat "$QK_SCRIPTS/node/etc/systemd/system.conf.d/10-quantykube.conf" "$QK_SCRIPTS/node/etc/systemd/journald.conf.d/10-quantykube.conf"
		declare -f customize_lb_template
	} | sha256sum | cut -c1-16
}

# ensure_lb_template sets QK_LB_TEMPLATE to a ready LB root directory
# ($QK_CACHE/kubeadm/lb-template-KEY, cached and packed like the node
# template, under the same lock).
ensure_lb_template() {
	local key dir
	key=$(lb_template_key)
	dir=$QK_CACHE/kubeadm/lb-template-$key
	QK_LB_TEMPLATE=$dir/rootfs
	[[ -e $dir/.complete ]] && { log "lb-template $key: cached at $dir"; return; }
	mkdir -p "$QK_CACHE/kubeadm"
	exec 8>"$QK_CACHE/kubeadm/.template.lock"
	if ! flock -n 8; then log "another up is building a template; waiting for it"; flock 8; fi
	prune_lb_templates "$key"
	build_root "$key" "$dir" "$dir.tar.zst" "$QK_LB_PACKAGES" customize_lb_template lb-template
	flock -u 8
	exec 8>&-
}

# prune_lb_templates KEY: delete LB templates of other keys no running node boots from.
prune_lb_templates() {
	local t k
	for t in "$QK_CACHE"/kubeadm/lb-template-*; do
		[[ -e $t ]] || continue
		k=${t##*/lb-template-}; k=${k%.tar.zst}
		[[ $k == "$1" ]] && continue
		if ps -C systemd-nspawn -o args= 2>/dev/null | grep -qF "lb-template-$k/"; then continue; fi
		[[ -d $t ]] && umount_below "$t"
		rm -rf "$t"
	done
}

# customize_lb_template R: the nodes' systemd settings, networkd and haproxy
# enabled, per-node identity removed (pitfall 9).
customize_lb_template() {
	local r=$1
	mkdir -p "$r/etc/systemd/system.conf.d" "$r/etc/systemd/journald.conf.d"
	cp "$QK_SCRIPTS/node/etc/systemd/system.conf.d/10-quantykube.conf" "$r/etc/systemd/system.conf.d/"
	cp "$QK_SCRIPTS/node/etc/systemd/journald.conf.d/10-quantykube.conf" "$r/etc/systemd/journald.conf.d/"
	: >"$r/etc/machine-id"
	rm -f "$r/var/lib/dbus/machine-id"
	ln -s /etc/machine-id "$r/var/lib/dbus/machine-id"
	chroot "$r" systemctl enable systemd-networkd.service haproxy.service >/dev/null 2>&1 || die "enable units in the LB template failed"
	chroot "$r" systemctl mask systemd-resolved.service getty@.service console-getty.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
}

# lb_files: the LB's address and haproxy.cfg, written into its upper layer.
lb_files() {
	local name ip
	name=$(lb_name)
	ip=$(lb_ip)
	mkdir -p "$(node_dir "$name")"
	: >"$(node_dir "$name")/lb"
	node_write "$name" /etc/systemd/network/80-container-host0.network <<EOF2
[Match]
Virtualization=container
Name=host0

[Network]
Address=$ip/24
Gateway=$QK_NODE_NET.1
LinkLocalAddressing=no
IPv6AcceptRA=no
EOF2
	{ echo "127.0.0.1 localhost"; echo "$ip $name"; } | node_write "$name" /etc/hosts
	lb_backends_planned | lb_haproxy_cfg | node_write "$name" /etc/haproxy/haproxy.cfg
	echo "$ip" >"$(node_dir "$name")/ip"
}

# lb_haproxy_cfg: kubeadm's HA guide's HAProxy configuration (TCP through to
# the API servers, an HTTPS /readyz check on each), with checks every 500 ms
# so a stopping API server leaves the rotation at once, and a failed connect
# retried on another server (redispatch): a client only sees a server go if
# it had a connection open to it. Timeouts are the guide's, but idle TCP
# connections live 10 min (client-go pings idle HTTP/2 connections every
# 30 s; watches may be quiet for longer than that). The backends are read
# from stdin, "NAME IP" a line (lb_backends_planned, lb_backends_state).
lb_haproxy_cfg() {
	local name ip
	cat <<EOF2
# Written by scripts/kubeadm.sh: the load balancer in front of $QK_CLUSTER's API servers.
global
    log stdout format raw local0 info
    stats socket /run/haproxy/admin.sock mode 660 level admin
    stats timeout 30s

defaults
    log global
    mode tcp
    option tcplog
    option dontlognull
    option redispatch
    retries 3
    timeout connect 2s
    timeout client 10m
    timeout server 10m
    timeout check 2s

frontend kube-apiserver
    bind *:$QK_LB_PORT
    default_backend kube-apiservers

backend kube-apiservers
    option httpchk
    http-check connect ssl
    http-check send meth GET uri /readyz
    http-check expect status 200
    balance roundrobin
    default-server inter 500ms fall 2 rise 2
EOF2
	while read -r name ip; do
		echo "    server $name $ip:6443 check verify none"
	done
}

# lb_backends_planned: "NAME IP" of every control plane `up` makes (they
# boot after the LB: their addresses come from their indexes).
lb_backends_planned() {
	local i
	for ((i = 0; i < QK_CONTROL_PLANES; i++)); do echo "$QK_CLUSTER-cp$((i + 1)) $(node_ip "$i")"; done
}

# lb_boot: the LB node's cgroups, files and nspawn, like node_boot's (no
# Kubernetes binds: nothing of Kubernetes runs there).
lb_boot() {
	local name dir cg cgs=()
	name=$(lb_name)
	dir=$(node_dir "$name")
	mkdir -p "$dir/upper" "$QK_STATE/host"
	node_cgroups_make "$name"
	lb_files
	while read -r cg; do [[ -n $cg ]] && cgs+=("$cg"); done < <(cgroup_leaves "$name")
	setsid bash -c 'for c in "${@:2:$1}"; do echo $$ >"$c/cgroup.procs" || exit 1; done; shift $(($1 + 1)); exec "$@"' \
		launcher "${#cgs[@]}" "${cgs[@]}" \
		systemd-nspawn -b -D "$QK_LB_TEMPLATE" --overlay="$QK_LB_TEMPLATE:$dir/upper:/" -M "$name" --hostname="$name" \
		--uuid="$(cat /proc/sys/kernel/random/uuid)" --register=no --keep-unit --capability=all \
		--network-bridge="$QK_BRIDGE" --resolv-conf=off --timezone=off --console=pipe \
		</dev/null >"$dir/console.log" 2>&1 &
	echo $! >"$dir/pid"
}

# lb_wait: the LB booted and haproxy listening on LB:6443.
lb_wait() {
	local name
	name=$(lb_name)
	node_wait_booted "$name"
	wait_for 30 "haproxy on $name" node_exec "$name" systemctl is-active --quiet haproxy ||
		die "haproxy did not start on $name; see: scripts/kubeadm.sh exec $name journalctl -u haproxy"
}

# lb_servers NAME: haproxy's view of each API server, one "server state" a
# line (state: UP, DOWN, or a transition such as "DOWN 1/2").
lb_servers() {
	node_exec "$1" sh -c 'echo "show stat" | socat - UNIX-CONNECT:/run/haproxy/admin.sock' 2>/dev/null |
		awk -F, '$1 == "kube-apiservers" && $2 != "BACKEND" {print $2, $18}'
}

# lb_all_up NAME N: haproxy sees N API servers, every one UP.
lb_all_up() {
	local n
	n=$(lb_servers "$1" | awk '$2 == "UP"' | wc -l)
	((n == $2))
}
