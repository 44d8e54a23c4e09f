# shellcheck shell=bash
# host.sh: what the host must have and what `up` changes on it.
#
# Invariant: every change to the host is recorded under $QK_STATE/host before
# it is made, so `down` can undo exactly what was done, even after a crash.

# require_host checks that this machine can run nodes at all.
require_host() {
	[[ $EUID -eq 0 ]] || die "must run as root (it makes a bridge, mounts, cgroups and iptables rules); rerun with sudo"
	[[ -d /sys/fs/cgroup/memory || -e /sys/fs/cgroup/cgroup.controllers ]] ||
		die "no cgroup support under /sys/fs/cgroup; this needs a Linux host with cgroups mounted"
	[[ -e /proc/sys/net/bridge || -d /sys/class/net ]] || die "no bridge support in this kernel"
}

# install_prereqs installs with apt whatever host tool is missing.
install_prereqs() {
	local -A want=([systemd-nspawn]=systemd-container [debootstrap]=debootstrap [iptables]=iptables
		[zstd]=zstd [nsenter]=util-linux [ip]=iproute2 [kubectl]=kubernetes-client)
	local pkgs=() cmd
	for cmd in "${!want[@]}"; do
		command -v "$cmd" >/dev/null || pkgs+=("${want[$cmd]}")
	done
	[[ -x /bin/busybox ]] && busybox_is_static || pkgs+=(busybox-static)
	((${#pkgs[@]})) || return 0
	log "installing host packages: ${pkgs[*]}"
	apt-get update -qq >/dev/null || die "apt-get update failed; check the Debian mirror in /etc/apt/sources.list.d"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null ||
		die "apt-get install ${pkgs[*]} failed; run it by hand to see why"
}

busybox_is_static() { ! LC_ALL=C ldd /bin/busybox >/dev/null 2>&1; }

# QK_SYSCTLS are the host kernel tunables kubelet insists on (its
# protectKernelDefaults checks; /proc/sys is read-only inside nodes).
QK_SYSCTLS=(vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1
	kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000)

# ha_sysctls prints the inotify limits a cluster behind a load balancer
# raises, each only when the host's is lower: systemd, journald, kubelet and
# containerd of every node take inotify instances from the one root user's
# limit (fs.inotify.max_user_instances, 128 by default), and a third cluster
# on this host ran out ("Too many open files" in systemd-networkd-wait-online,
# the node never finished booting). Recorded and restored like QK_SYSCTLS.
# (Kind raises the same two.)
ha_sysctls() {
	local kv
	for kv in fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=524288; do
		(($(sysctl -n "${kv%%=*}") < ${kv#*=})) && echo "$kv"
	done
	return 0
}

# Host-wide changes (the sysctls, the tmpfs on /run/systemd/nspawn) are shared
# by every cluster on the host (other QK_STATE dirs). They are recorded once in
# QK_HOSTREG, with one registration file per cluster in QK_HOSTREG/clusters;
# the last cluster to go down restores the sysctls, unmounts the tmpfs and
# removes QK_HOSTREG. A registration whose state dir is gone counts as down.
QK_HOSTREG=${QK_HOSTREG:-/run/quantykube-kubeadm}

host_register() {
	local key
	key=$(printf '%s' "$QK_STATE" | sha256sum | cut -c1-16)
	mkdir -p "$QK_STATE/host"
	echo "$QK_HOSTREG/clusters/$key" >"$QK_STATE/host/registered"
	mkdir -p "$QK_HOSTREG/clusters"
	echo "$QK_STATE" >"$QK_HOSTREG/clusters/$key"
}

# host_unregister: drop this cluster's registration; when no live cluster is
# left, undo the host-wide changes.
host_unregister() {
	local reg f others=()
	reg=$(cat "$QK_STATE/host/registered" 2>/dev/null || true)
	[[ -n $reg ]] && rm -f "$reg"
	if [[ -d $QK_HOSTREG/clusters ]]; then
		for f in "$QK_HOSTREG"/clusters/*; do
			[[ -f $f ]] || continue
			if [[ -d $(cat "$f")/nodes ]]; then others+=("$(cat "$f")"); else rm -f "$f"; fi
		done
	fi
	rm -f "$QK_STATE/host/registered"
	# Records an older kubeadm.sh kept in the state dir join the host-wide
	# ones (the first record of an original value wins).
	for f in sysctl.orig mounted created-dirs; do
		if [[ -f $QK_STATE/host/$f ]]; then
			mkdir -p "$QK_HOSTREG"
			[[ -f $QK_HOSTREG/$f ]] || cp "$QK_STATE/host/$f" "$QK_HOSTREG/$f"
			rm -f "$QK_STATE/host/$f"
		fi
	done
	# nodes of clusters made before this registry existed, or by hand
	if nspawn_running; then
		others+=("(running systemd-nspawn processes)")
	fi
	if ((${#others[@]})); then
		log "other clusters are still up (${others[*]}): the host sysctls and /run/systemd/nspawn stay for them"
		return 0
	fi
	restore_sysctls
	unmount_nspawn_run
	if [[ -d $QK_HOSTREG ]] && [[ -z $(ls -A "$QK_HOSTREG/clusters" 2>/dev/null) ]] && [[ ! -f $QK_HOSTREG/sysctl.orig && ! -f $QK_HOSTREG/mounted ]]; then
		rm -rf "$QK_HOSTREG"
	fi
}

# set_sysctls records each original value once (QK_HOSTREG/sysctl.orig) and sets the new one.
set_sysctls() {
	local orig=$QK_HOSTREG/sysctl.orig kv key
	mkdir -p "$QK_HOSTREG"
	if [[ ! -f $orig ]] && nspawn_running; then
		# nodes not registered here (made by hand or by an older kubeadm.sh)
		# may have changed them already: the true originals are unknown.
		log "warning: other systemd-nspawn nodes run on this host; not recording the sysctls to restore"
		orig=/dev/null
	fi
	[[ $orig == /dev/null ]] || touch "$orig"
	for kv in "${QK_SYSCTLS[@]}"; do
		key=${kv%%=*}
		[[ $orig == /dev/null ]] || grep -q "^$key=" "$orig" || echo "$key=$(sysctl -n "$key")" >>"$orig"
		sysctl -q -w "$kv" || die "sysctl -w $kv failed; kubelet needs it on the host"
	done
}

restore_sysctls() {
	local orig=$QK_HOSTREG/sysctl.orig kv ok=1
	[[ -f $orig ]] || return 0
	while IFS= read -r kv; do
		[[ -n $kv ]] || continue
		sysctl -q -w "$kv" || { log "warning: could not restore sysctl $kv"; ok=0; }
	done <"$orig"
	((ok)) && rm -f "$orig"
}

# nspawn refuses to run unless /run/systemd/nspawn is on a tmpfs (there is
# no systemd on this host to make it one).
mount_nspawn_run() {
	mountpoint -q /run/systemd/nspawn && return 0
	mkdir -p "$QK_HOSTREG"
	[[ -d /run/systemd ]] || echo /run/systemd >>"$QK_HOSTREG/created-dirs"
	[[ -d /run/systemd/nspawn ]] || echo /run/systemd/nspawn >>"$QK_HOSTREG/created-dirs"
	echo /run/systemd/nspawn >"$QK_HOSTREG/mounted"
	mkdir -p /run/systemd/nspawn
	mount -t tmpfs -o mode=0755 qk-nspawn /run/systemd/nspawn || die "mount tmpfs on /run/systemd/nspawn failed"
}

unmount_nspawn_run() {
	local m d
	if [[ -f $QK_HOSTREG/mounted ]]; then
		while read -r m; do
			mountpoint -q "$m" && { umount "$m" || umount -l "$m"; }
		done <"$QK_HOSTREG/mounted"
		local left=0
		while read -r m; do mountpoint -q "$m" && left=1; done <"$QK_HOSTREG/mounted"
		((left)) || rm -f "$QK_HOSTREG/mounted"
	fi
	if [[ -f $QK_HOSTREG/created-dirs ]]; then
		# deepest first
		sort -r "$QK_HOSTREG/created-dirs" | while read -r d; do rmdir "$d" 2>/dev/null || true; done
		rm -f "$QK_HOSTREG/created-dirs"
	fi
}

# nspawn_running: some systemd-nspawn process (not a zombie) is alive on the host.
nspawn_running() { ps -C systemd-nspawn -o stat= 2>/dev/null | grep -qv '^Z'; }
