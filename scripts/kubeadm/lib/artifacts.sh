# shellcheck shell=bash
# artifacts.sh: the binaries and OCI images a cluster needs, built on this
# machine and cached.
#
# Binaries come from scripts/deps.sh (cached by version under .cache/deps) and
# from this repository (quantykube). Images are docker-archive tarballs made by
# scripts/mkimage, cached under .cache/kubeadm/images as NAME-KEY.tar, where
# KEY covers the image's tag, its files' identities and mkimage's sources: an
# unchanged input never rebuilds an image. The tarballs of the current `up`
# are hard-linked into $QK_STATE/images, which every node sees read-only at
# /opt/quantykube/images; control-plane nodes import all of them, workers the
# ones whose name does not start with "kube-" or "etcd".

QK_DEPS_NAMES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubeadm etcd etcdctl crictl)

# ensure_artifacts sets QK_BIN[name] for every binary and fills $QK_STATE/images.
ensure_artifacts() {
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
	if (cd "$QK_ROOT" && CGO_ENABLED=0 go build -o "$tools/quantykube.tmp" ./cmd/quantykube) 2>"$tools/quantykube.build.log"; then
		mv "$tools/quantykube.tmp" "$tools/quantykube"
		QK_BIN[quantykube]=$tools/quantykube
	else
		log "warning: quantykube does not build now (see $tools/quantykube.build.log); the cluster gets no $QK_QUANTYKUBE_IMAGE image"
	fi
	build_images
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
wget xargs awk cut"

build_images() {
	local v=$QK_K8S_VERSION n links=()
	rm -rf "$QK_STATE/images"
	mkdir -p "$QK_STATE/images" "$QK_CACHE/kubeadm/images"
	for n in kube-apiserver kube-controller-manager kube-scheduler; do
		make_image "$n" "registry.k8s.io/$n:$v" "/usr/local/bin/$n" "${QK_BIN[$n]}:/usr/local/bin/$n"
	done
	make_image etcd "registry.k8s.io/etcd:$QK_ETCD_VERSION" /usr/local/bin/etcd \
		"${QK_BIN[etcd]}:/usr/local/bin/etcd" "${QK_BIN[etcdctl]}:/usr/local/bin/etcdctl"
	make_image pause "registry.k8s.io/pause:$QK_PAUSE_TAG" /pause "${QK_BIN[pause]}:/pause"
	for n in $BUSYBOX_APPLETS; do links+=(-link "/bin/$n:busybox"); done
	make_image busybox "$QK_WORKLOAD_IMAGE" "" /bin/busybox:/bin/busybox -- "${links[@]}" -cmd /bin/sh
	if [[ -n ${QK_BIN[quantykube]:-} ]]; then
		make_image quantykube "$QK_QUANTYKUBE_IMAGE" /usr/local/bin/quantykube "${QK_BIN[quantykube]}:/usr/local/bin/quantykube"
	fi
}

# node_import_images NAME ROLE: import the images the node's role needs into its containerd.
node_import_images() {
	local name=$1 role=$2 f b
	wait_for 60 "containerd on $name" node_exec "$name" ctr -n k8s.io version || die "containerd did not start on $name; try: scripts/kubeadm.sh exec $name journalctl -u containerd"
	for f in "$QK_STATE"/images/*.tar; do
		b=$(basename "$f")
		[[ $role == worker && ( $b == kube-* || $b == etcd* ) ]] && continue
		node_exec "$name" ctr -n k8s.io images import "/opt/quantykube/images/$b" >/dev/null ||
			die "importing $b into $name failed"
	done
}
