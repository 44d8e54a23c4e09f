# shellcheck shell=bash
# artifacts.sh: the binaries and OCI images a cluster needs, built on this
# machine and cached.
#
# Binaries come from scripts/deps.sh (cached by version under $QK_CACHE/deps) and
# from this repository (quantykube). Images are docker-archive tarballs made by
# scripts/mkimage, cached under $QK_CACHE/kubeadm/images as NAME-KEY.tar, where
# KEY covers the image's tag, its files' identities and mkimage's sources: an
# unchanged input never rebuilds an image. The tarballs of the current `up`
# are hard-linked into $QK_STATE/images, which every node sees read-only at
# /opt/quantykube/images; control-plane nodes import all of them, workers all
# but the control plane's own (kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd).

QK_DEPS_NAMES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubeadm kube-proxy etcd etcdctl etcdutl crictl coredns)
QK_COREDNS_TAG=${QK_COREDNS_TAG:-v1.14.2} # kubeadm v1.36.3's CoreDNSVersion (`kubeadm config images list`)

# ensure_artifacts sets QK_BIN[name] for every binary and fills $QK_STATE/images.
# It needs the node template (ensure_template first): kube-proxy's iptables
# come from it.
ensure_artifacts() {
	[[ -n ${QK_TEMPLATE:-} && -x $QK_TEMPLATE/usr/sbin/xtables-nft-multi ]] ||
		die "internal: ensure_artifacts needs the node template (ensure_template first)"
	artifacts_lock
	declare -gA QK_BIN=()
	local paths i
	log "binaries: scripts/deps.sh path ${QK_DEPS_NAMES[*]} (builds what is not cached; the first kube build takes 10+ minutes)"
	paths=$(QK_CACHE=$QK_CACHE "$QK_ROOT/scripts/deps.sh" path "${QK_DEPS_NAMES[@]}") || die "scripts/deps.sh failed (see above)"
	mapfile -t paths <<<"$paths"
	for i in "${!QK_DEPS_NAMES[@]}"; do
		[[ -x ${paths[$i]} ]] || die "scripts/deps.sh gave no executable for ${QK_DEPS_NAMES[$i]} (got '${paths[$i]}')"
		QK_BIN[${QK_DEPS_NAMES[$i]}]=${paths[$i]}
	done
	local tools=$QK_CACHE/kubeadm/tools
	mkdir -p "$tools"
	(cd "$QK_ROOT" && CGO_ENABLED=0 go build -o "$tools/mkimage" ./scripts/mkimage &&
		CGO_ENABLED=0 go build -o "$tools/pause" ./scripts/mkimage/pause) || die "building scripts/mkimage failed (see above)"
	QK_BIN[pause]=$tools/pause
	QK_BIN[busybox]=/bin/busybox
	if build_quantykube "$tools/quantykube" 2>"$tools/quantykube.build.log"; then
		QK_BIN[quantykube]=$tools/quantykube
	else
		log "warning: quantykube does not build now (see $tools/quantykube.build.log); the cluster gets no $QK_QUANTYKUBE_IMAGE image"
	fi
	build_images
	artifacts_unlock
}

# artifacts_lock / artifacts_unlock: one caller at a time builds into the
# shared $QK_CACHE/kubeadm/tools and images/ (two slots' clusters brought up
# together would write the same files: tools/quantykube.tmp, mkimage's
# NAME-KEY.tar.tmp). A caller that dies releases it with its process.
artifacts_lock() {
	mkdir -p "$QK_CACHE/kubeadm"
	exec 7>"$QK_CACHE/kubeadm/.artifacts.lock"
	if ! flock -n 7; then log "another cluster is building its artifacts; waiting for it"; flock 7; fi
}
artifacts_unlock() {
	flock -u 7
	exec 7>&-
}

# image_key NAME TAG FILES...: a cache key for one image.
image_key() {
	local f
	{
		echo "$1 $2"
		(cd "$QK_ROOT/scripts/mkimage" && find . -name "*.go" ! -name "*_test.go" | LC_ALL=C sort | xargs cat)
		shift 2
		for f in "$@"; do
			case $f in
			"$QK_CACHE"/deps/*) stat -c '%n %s %Y' "$f" ;; # deps.sh never rewrites a cached binary in place
			*) sha256sum <"$f" ;;
			esac
		done
	} | sha256sum | cut -c1-16
}

# make_image NAME TAG ENTRYPOINT SRC:DST... [-- EXTRA mkimage ARGS...]
make_image() {
	local name=$1 tag=$2 entry=$3 adds=() srcs=() extra=() key out
	shift 3
	while [[ $# -gt 0 && $1 != -- ]]; do adds+=(-add "$1"); srcs+=("${1%%:*}"); shift; done
	[[ ${1:-} == -- ]] && { shift; extra=("$@"); }
	key=$(image_key "$name" "$tag" "${srcs[@]}")
	out=$QK_CACHE/kubeadm/images/$name-$key.tar
	if [[ ! -s $out ]]; then
		log "image $tag: building"
		"$QK_CACHE/kubeadm/tools/mkimage" -out "$out" -tag "$tag" ${entry:+-entrypoint "$entry"} "${adds[@]}" "${extra[@]}" 2>/dev/null ||
			die "mkimage $tag failed; rerun by hand: $QK_CACHE/kubeadm/tools/mkimage -out /tmp/x.tar -tag $tag ${adds[*]}"
	fi
	ln -f "$out" "$QK_STATE/images/$name.tar"
	# older builds of this image that no cluster links to any more
	local old
	for old in "$QK_CACHE/kubeadm/images/$name"-*.tar; do
		[[ $old != "$out" && $(stat -c %h "$old" 2>/dev/null) == 1 ]] && rm -f "$old"
	done
	return 0
}

BUSYBOX_APPLETS="sh ash cat chmod cp date dd df du echo env false find grep head hostname id ip kill ln ls mkdir
mv nc nslookup ping printf ps pwd rm rmdir sed seq sleep sort stat tail tee test top touch tr true uname uniq vi wc
wget xargs awk cut httpd"

build_images() {
	local v=$QK_K8S_VERSION n links=()
	rm -rf "$QK_STATE/images"
	mkdir -p "$QK_STATE/images" "$QK_CACHE/kubeadm/images"
	for n in kube-apiserver kube-controller-manager kube-scheduler; do
		make_image "$n" "registry.k8s.io/$n:$v" "/usr/local/bin/$n" "${QK_BIN[$n]}:/usr/local/bin/$n"
	done
	# as upstream's image: etcd, etcdctl and etcdutl (undo store takes etcdutl from the running etcd's image)
	make_image etcd "registry.k8s.io/etcd:$QK_ETCD_VERSION" /usr/local/bin/etcd \
		"${QK_BIN[etcd]}:/usr/local/bin/etcd" "${QK_BIN[etcdctl]}:/usr/local/bin/etcdctl" "${QK_BIN[etcdutl]}:/usr/local/bin/etcdutl"
	make_image pause "registry.k8s.io/pause:$QK_PAUSE_TAG" /pause "${QK_BIN[pause]}:/pause"
	make_kube_proxy_image
	# upstream's entrypoint; kubeadm's Deployment passes only "-conf /etc/coredns/Corefile"
	make_image coredns "registry.k8s.io/coredns/coredns:$QK_COREDNS_TAG" /coredns "${QK_BIN[coredns]}:/coredns"
	for n in $BUSYBOX_APPLETS; do links+=(-link "/bin/$n:busybox"); done
	make_image busybox "$QK_WORKLOAD_IMAGE" "" /bin/busybox:/bin/busybox -- "${links[@]}" -cmd /bin/sh
	if [[ -n ${QK_BIN[quantykube]:-} ]]; then
		make_quantykube_image || die "scripts/image.sh failed (see above)"
	fi
}

# make_quantykube_image: QuantyKube's image as scripts/image.sh builds it from
# the working tree (an OCI archive named $QK_QUANTYKUBE_IMAGE, by default
# ghcr.io/quantyroot/quantykube:<internal/version.Version>), cached by
# content as quantykube-SHA.tar (image.sh's archives are byte-equal for equal
# trees) and linked into $QK_STATE/images/quantykube.tar: an unchanged tree
# keeps the same file. (`e2e` installs scripts/release.sh's image instead.)
make_quantykube_image() {
	local dir=$QK_CACHE/kubeadm/images tmp sum out old
	tmp=$dir/.quantykube-$$.tar
	"$QK_ROOT/scripts/image.sh" --tag "$QK_QUANTYKUBE_IMAGE" "$tmp" >/dev/null 2>"$dir/.quantykube-$$.log" || {
		cat "$dir/.quantykube-$$.log" >&2
		rm -f "$tmp" "$dir/.quantykube-$$.log"
		return 1
	}
	rm -f "$dir/.quantykube-$$.log"
	sum=$(sha256sum <"$tmp" | cut -c1-16)
	out=$dir/quantykube-$sum.tar
	if [[ -s $out ]]; then rm -f "$tmp"; else mv "$tmp" "$out"; fi
	ln -f "$out" "$QK_STATE/images/quantykube.tar"
	for old in "$dir"/quantykube-*.tar; do
		[[ $old != "$out" && $(stat -c %h "$old" 2>/dev/null) == 1 ]] && rm -f "$old"
	done
	return 0
}

# node_import_images NAME ROLE: import the images the node's role needs into its containerd.
node_import_images() {
	local name=$1 role=$2 f b
	wait_for 60 "containerd on $name" node_exec "$name" ctr -n k8s.io version || die "containerd did not start on $name; try: scripts/kubeadm.sh exec $name journalctl -u containerd"
	for f in "$QK_STATE"/images/*.tar; do
		b=$(basename "$f")
		[[ $role == worker && $b =~ ^(kube-apiserver|kube-controller-manager|kube-scheduler|etcd)\.tar$ ]] && continue
		node_exec "$name" ctr -n k8s.io images import "/opt/quantykube/images/$b" >/dev/null ||
			die "importing $b into $name failed"
	done
}

# make_kube_proxy_image: registry.k8s.io/kube-proxy with the iptables userland
# of the node template (Debian's iptables-nft, what the node's own iptables
# and the CNI plugins use, so kube-proxy's rules and theirs are one ruleset):
# xtables-nft-multi, its extensions, and every shared library they load, at
# the merged-/usr paths with /lib and /lib64 as symlinks, as in Debian.
make_kube_proxy_image() {
	local t=$QK_TEMPLATE adds=() links=() f lib n
	local ext=usr/lib/x86_64-linux-gnu/xtables
	adds+=("${QK_BIN[kube-proxy]}:/usr/local/bin/kube-proxy" "$t/usr/sbin/xtables-nft-multi:/usr/sbin/xtables-nft-multi")
	for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
		links+=(-link "/usr/sbin/$n:xtables-nft-multi")
	done
	links+=(-link /lib:usr/lib -link /lib64:usr/lib64)
	for f in "$t/$ext"/*.so; do adds+=("$f:/$ext/${f##*/}"); done
	# ldd in the template (read-only: a chroot that only reads), for the binary and every extension
	while read -r lib; do
		[[ $lib == /usr/* ]] || lib=/usr$lib
		adds+=("$t$lib:$lib")
	done < <({
		chroot "$t" ldd /usr/sbin/xtables-nft-multi
		for f in "$t/$ext"/*.so; do chroot "$t" ldd "/$ext/${f##*/}"; done
	} | awk '$2=="=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | LC_ALL=C sort -u)
	((${#adds[@]} > 20)) || die "found no iptables libraries in the template $t (ldd failed?)"
	make_image kube-proxy "registry.k8s.io/kube-proxy:$QK_K8S_VERSION" /usr/local/bin/kube-proxy "${adds[@]}" -- "${links[@]}"
}
