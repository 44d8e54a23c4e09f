# shellcheck shell=bash
# template.sh: the node root filesystem, built once with debootstrap and
# cached as a tarball keyed by its inputs.
#
# Invariant: a template directory is never modified after its .complete marker
# is written; nodes only ever see it as the lower layer of an overlay. The key
# covers the suite, the package list, the node files in scripts/kubeadm/node/
# and the body of customize_template, so changing any of them builds a new one.
# Kubernetes binaries and images are NOT in the template (they are bound or
# imported per node), so rebuilding kubelet does not rebuild the template.

QK_TEMPLATE_PACKAGES=systemd,systemd-sysv,dbus,iproute2,iptables,procps,containerd,runc,containernetworking-plugins,ca-certificates,conntrack,ethtool,socat,kmod,util-linux,mount

debian_mirror() {
	if [[ -n ${QK_DEBIAN_MIRROR:-} ]]; then echo "$QK_DEBIAN_MIRROR"; return; fi
	local m
	m=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
	[[ -z $m ]] && m=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
	echo "${m:-http://deb.debian.org/debian}"
}

template_key() {
	{
		echo "$QK_DEBIAN_SUITE $QK_TEMPLATE_PACKAGES"
		(cd "$QK_SCRIPTS/node" && find . -type f | LC_ALL=C sort | xargs sha256sum)
		declare -f customize_template
	} | sha256sum | cut -c1-16
}

# ensure_template sets QK_TEMPLATE to a ready template root directory. One
# caller at a time per cache (flock on $QK_CACHE/kubeadm/.template.lock):
# clusters of several slots share the cache, and a second caller must not
# delete a template the first is still building; it waits and finds it done.
ensure_template() {
	local key dir tarball
	key=$(template_key)
	dir=$QK_CACHE/kubeadm/template-$key
	tarball=$QK_CACHE/kubeadm/template-$key.tar.zst
	QK_TEMPLATE=$dir/rootfs
	if [[ -e $dir/.complete ]]; then
		log "template $key: cached at $dir"
		return
	fi
	mkdir -p "$QK_CACHE/kubeadm"
	exec 8>"$QK_CACHE/kubeadm/.template.lock"
	if ! flock -n 8; then log "another up is building the template; waiting for it"; flock 8; fi
	build_template "$key" "$dir" "$tarball"
	flock -u 8
	exec 8>&-
}

# build_template KEY DIR TARBALL: the template of KEY, from its tarball or by
# debootstrap (under ensure_template's lock).
build_template() {
	prune_templates "$1"
	build_root "$1" "$2" "$3" "$QK_TEMPLATE_PACKAGES" customize_template template
}

# build_root KEY DIR TARBALL PACKAGES CUSTOMIZE LABEL: a root filesystem in
# DIR/rootfs, unpacked from TARBALL when there is one, else debootstrapped
# with PACKAGES, finished by the function CUSTOMIZE and packed to TARBALL.
# DIR/.complete marks it done; a build in progress is recorded in
# host/template-build so `down` cleans up after a crash. LABEL names it in logs.
build_root() {
	local key=$1 dir=$2 tarball=$3 packages=$4 customize=$5 label=$6
	if [[ -e $dir/.complete ]]; then
		log "$label $key: cached at $dir"
		return
	fi
	# A half-built template (a killed `up`) may still have debootstrap's /proc
	# and /sys mounted inside: unmount before deleting anything.
	umount_below "$dir"
	rm -rf "$dir"
	mkdir -p "$dir/rootfs" "$QK_STATE/host"
	echo "$dir" >"$QK_STATE/host/template-build"
	if [[ -s $tarball ]]; then
		log "$label $key: unpacking $tarball"
		if tar -C "$dir/rootfs" --numeric-owner -xpf "$tarball" -I zstd; then
			touch "$dir/.complete"
			rm -f "$QK_STATE/host/template-build"
			return
		fi
		# a damaged tarball (the disk, a hand edit: packing writes it whole or not at all)
		log "$label $key: $tarball does not unpack: removed, building it again"
		rm -rf "$tarball" "$dir/rootfs"
		mkdir -p "$dir/rootfs"
	fi
	local build=$dir/rootfs
	log "$label $key: debootstrap $QK_DEBIAN_SUITE from $(debian_mirror) (about a minute)"
	debootstrap --variant=minbase --include="$packages" "$QK_DEBIAN_SUITE" "$build" "$(debian_mirror)" \
		>"$dir/debootstrap.log" 2>&1 || die "debootstrap failed; see $dir/debootstrap.log (is the Debian mirror reachable? set QK_DEBIAN_MIRROR)"
	"$customize" "$build"
	log "$label $key: packing $tarball"
	tar -C "$build" --numeric-owner -cpf "$tarball.tmp" -I 'zstd -T0 -3' . && mv "$tarball.tmp" "$tarball"
	touch "$dir/.complete"
	rm -f "$QK_STATE/host/template-build"
}

# prune_templates KEY: delete cached templates of other keys that no running
# node boots from (their inputs changed; each is ~450 MB with its tarball).
prune_templates() {
	local t k
	for t in "$QK_CACHE"/kubeadm/template-*; do
		[[ -e $t ]] || continue
		k=${t##*/template-}; k=${k%.tar.zst}
		[[ $k == "$1" ]] && continue
		if ps -C systemd-nspawn -o args= 2>/dev/null | grep -qF "template-$k/"; then continue; fi
		[[ -d $t ]] && umount_below "$t"
		rm -rf "$t"
	done
}

# umount_below DIR: unmount everything mounted at or below DIR, deepest first.
umount_below() {
	local d m
	d=$(realpath -m "$1")
	awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m" || log "warning: could not unmount $m"
	done
}

# template_build_cleanup: after a crash during a template build, unmount what
# debootstrap left mounted and delete the unfinished template.
template_build_cleanup() {
	local f=$QK_STATE/host/template-build dir
	[[ -f $f ]] || return 0
	dir=$(cat "$f")
	if [[ -n $dir ]]; then
		umount_below "$dir"
		[[ -e $dir/.complete ]] || rm -rf "$dir"
	fi
	rm -f "$f"
}

# customize_template R: node files, units enabled, per-node identity removed.
customize_template() {
	local r=$1
	cp -a "$QK_SCRIPTS/node/." "$r/"
	chmod 0755 "$r"/usr/local/sbin/* 2>/dev/null || true
	# Every node gets its own machine-id on first boot (pitfall 9).
	: >"$r/etc/machine-id"
	rm -f "$r/var/lib/dbus/machine-id"
	ln -s /etc/machine-id "$r/var/lib/dbus/machine-id"
	# Binaries bound in from the host at boot (nspawn --bind-ro) need a mount point.
	local b
	for b in kubelet kubeadm crictl; do : >"$r/usr/bin/$b"; chmod 0755 "$r/usr/bin/$b"; done
	mkdir -p "$r/opt/quantykube/images" "$r/var/lib/containerd" "$r/etc/kubernetes/manifests" "$r/var/lib/kubelet"
	chroot "$r" systemctl enable systemd-networkd.service qk-node-prep.service containerd.service kubelet.service >/dev/null 2>&1 ||
		die "enable units in the template failed"
	chroot "$r" systemctl mask systemd-resolved.service getty@.service console-getty.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
}
