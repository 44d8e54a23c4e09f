# shellcheck shell=bash
# grow.sh: `grow --control-planes N` adds control planes to a running cluster
# whose controlPlaneEndpoint is the load balancer (`up --lb`, or one grown
# before), the way kubeadm's HA guide adds them: the control-plane
# certificates uploaded again under a fresh certificate key (the upload of
# `init --upload-certs` expires after 2 h, and a one-control-plane init made
# none), a fresh join token, `kubeadm join --control-plane` through the LB
# one node at a time with up's JoinConfiguration (each adds a stacked etcd
# member, learner first), each node put behind haproxy once it has joined;
# then the waits of `up` (every node Ready, every control-plane pod Ready,
# every API server UP behind the LB) and a hello Deployment on each new node.
#
# Addresses: a node's address and pod subnet come from its index (node.sh),
# and `up` gives indexes in boot order, so the worker of a one-control-plane
# cluster holds index 1. New nodes take the indexes after the highest in use
# (read back from each node's recorded address); the running nodes get a
# route to each new pod subnet (live, and in their networkd file) and the
# new names in /etc/hosts.
#
# Invariants: everything grow makes is recorded in $QK_STATE before it is
# made, as for `up` (cluster.sh): grow/ holds the target count and the new
# nodes with their indexes, written before anything else; each new node's
# directory exists before its cgroups and its nspawn (node_boot). So `down`
# removes what a grow made after a crash at any point, and a running grow
# (grow.pid) is killed by `down` first. Refusals are one line and change
# nothing.
#
# A grow killed halfway is completed by running the same grow again: grow/
# gives the same names and indexes; a new node that runs is kept, one never
# started (or whose start was cut) is made again, one that joined
# (nodes/NAME/joined) is left as it is, one whose join was cut short
# (kubeadm's files on it, no marker) is reset (`kubeadm reset -f`, which
# also removes its etcd member) and joined again; certificates and token are
# made fresh each run. It refuses, naming `down`, when a node it joined no
# longer runs (its etcd member counts toward the quorum) or when another
# count is asked than the unfinished grow's.

# cmd_grow N: grow the cluster of $QK_STATE to N control planes.
cmd_grow() {
	local want=$1 t0=$SECONDS cp1=$QK_CLUSTER-cp1 n i names=() idx=() token key
	require_host
	grow_refusals "$want"
	echo $$ >"$QK_STATE/grow.pid"
	grow_record "$want"
	QK_LB=1
	QK_CONTROL_PLANES=$want
	QK_LAYOUT=$(grow_layout)
	boot_args_of "$cp1"
	mapfile -t names < <(awk '{print $1}' "$QK_STATE/grow/new")
	mapfile -t idx < <(awk '{print $2}' "$QK_STATE/grow/new")
	log "grow: ${names[*]} join $(grow_existing_cps | wc -l) control plane(s) behind $(lb_name)"

	for i in "${!names[@]}"; do grow_routes_to "${names[i]}" "${idx[i]}"; done
	for i in "${!names[@]}"; do grow_boot "${names[i]}" "${idx[i]}"; done
	for n in "${names[@]}"; do node_wait_booted "$n"; done
	log "grow: nodes booted: ${names[*]}"
	run_per_node import "${names[@]}"
	log "grow: images imported"

	key=$(grow_upload_certs "$cp1")
	token=$(grow_token "$cp1")
	log "grow: control-plane certificates uploaded under a fresh key, a fresh join token made on $cp1"
	for n in "${names[@]}"; do
		grow_join "$n" "$token" "$key"
		lb_update
		log "grow: $n joined (control plane), behind $(lb_name)"
	done

	wait_cluster_ready "$(state_layout | wc -l)"
	wait_for "$QK_WAIT" "every API server UP behind $(lb_name)" lb_all_up "$(lb_name)" "$want" ||
		die "the load balancer does not see every API server ready: $(lb_servers "$(lb_name)" | tr '\n' ' ')"
	log "the load balancer $(lb_name) sees $want API servers UP"
	deploy_hello "${names[@]}"
	rm -rf "$QK_STATE/grow" "$QK_STATE/grow.pid"
	log "grow: $want control planes Ready in $((SECONDS - t0))s"
}

# grow_refusals N: dies with one line naming the problem and its fix when
# this cluster cannot grow to N control planes now; changes nothing.
grow_refusals() {
	local want=$1 have pid
	[[ -f $QK_STATE/kubeconfig ]] || die "grow: no cluster in $QK_STATE; run 'scripts/kubeadm.sh up --lb --workers 1' first"
	if pid=$(running_pid "$QK_STATE/grow.pid"); then
		die "grow: another grow (pid $pid) is running on this cluster; wait for it to end, or stop it with 'scripts/kubeadm.sh down'"
	fi
	if [[ -f $QK_STATE/up.pid ]]; then
		die "grow: the cluster's up has not finished (it runs or was killed); wait for it, or run 'scripts/kubeadm.sh up --lb' again"
	fi
	is_lb "$(lb_name)" || die "grow: the cluster has no load balancer (kubeadm joins control planes only through a shared endpoint); run 'scripts/kubeadm.sh up --lb --workers 1' to make one that can grow"
	if [[ -f $QK_STATE/grow/target ]]; then
		have=$(cat "$QK_STATE/grow/target")
		((want == have)) || die "grow: an earlier grow --control-planes $have did not finish; run 'scripts/kubeadm.sh grow --control-planes $have' to complete it, or 'scripts/kubeadm.sh down'"
		grow_check_joined_running
		return 0
	fi
	have=$(grow_existing_cps | wc -l)
	((want > have)) || die "grow --control-planes $want: the cluster has $have control plane(s) already; ask for more, e.g. --control-planes $((have + 1 + have % 2))"
	((want % 2 == 1)) || die "grow --control-planes $want: stacked etcd wants an odd number of members (an even one tolerates no more failures than one fewer); use $((want - 1 > have ? want - 1 : want + 1))"
	(($(state_layout | awk '{print $2}' | sort -n | tail -n 1) + want - have <= QK_MAX_INDEX)) ||
		die "grow --control-planes $want: the new nodes' addresses do not fit in $QK_NODE_NET.0/24; ask for fewer"
	grow_check_on_etcd "$QK_CLUSTER-cp1"
}

# grow_check_on_etcd CP: CP's API server runs on its stacked etcd, which a
# joining control plane adds a member to (not on quantykube store).
grow_check_on_etcd() {
	local servers
	node_leader "$1" >/dev/null || die "grow: $1 is not running (see $(node_dir "$1")/console.log); run 'scripts/kubeadm.sh up --lb' again"
	servers=$(node_exec "$1" grep -o -e '--etcd-servers=[^ "]*' /etc/kubernetes/manifests/kube-apiserver.yaml) ||
		die "grow: cannot read $1's kube-apiserver manifest; check the cluster with 'scripts/kubeadm.sh status'"
	[[ $servers == *:2379* ]] || die "grow: $1's kube-apiserver uses $servers, not its stacked etcd (the store moved?); undo the move first (quantykube undo store, or spec.undo), then grow"
}

# grow_check_joined_running: every node an unfinished grow joined still runs
# (its etcd member counts toward the quorum; a new one cannot replace it).
grow_check_joined_running() {
	local n k
	while read -r n k; do
		[[ -e $(node_dir "$n")/joined ]] || continue
		node_leader "$n" >/dev/null || die "grow: $n joined the cluster in an earlier grow and no longer runs; its etcd member is lost: run 'scripts/kubeadm.sh down' and up again"
	done <"$QK_STATE/grow/new"
}

# grow_existing_cps: the control planes in the state dir that no unfinished
# grow is adding (up's, and those of finished grows).
grow_existing_cps() {
	local n
	for n in $(state_nodes); do
		[[ $n =~ ^$QK_CLUSTER-cp[0-9]+$ ]] || continue
		[[ -f $QK_STATE/grow/new ]] && grep -q "^$n " "$QK_STATE/grow/new" && continue
		echo "$n"
	done
}

# grow_record N: grow/target and grow/new ("NAME INDEX" of each new node,
# the indexes after the highest in use), written once, before any node is
# made; a rerun reads them back.
grow_record() {
	local want=$1 have next i
	[[ -f $QK_STATE/grow/new ]] && return 0
	have=$(grow_existing_cps | wc -l)
	next=$(($(state_layout | awk '{print $2}' | sort -n | tail -n 1) + 1))
	mkdir -p "$QK_STATE/grow"
	for ((i = have + 1; i <= want; i++)); do
		echo "$QK_CLUSTER-cp$i $((next + i - have - 1))"
	done >"$QK_STATE/grow/new.tmp"
	mv "$QK_STATE/grow/new.tmp" "$QK_STATE/grow/new"
	echo "$want" >"$QK_STATE/grow/target"
}

# grow_layout: QK_LAYOUT of the grown cluster: the running nodes with their
# recorded indexes, then the new ones with theirs.
grow_layout() {
	local n k
	state_layout | while read -r n k; do grep -q "^$n " "$QK_STATE/grow/new" || echo "$n $k"; done
	cat "$QK_STATE/grow/new"
}

# boot_args_of NODE sets QK_TEMPLATE and QK_BINDS to those NODE was booted
# with (its nspawn's command line): new nodes boot from the same template
# with the same Kubernetes binaries and images as the running ones.
boot_args_of() {
	local pid a prev=""
	pid=$(cat "$(node_dir "$1")/pid" 2>/dev/null)
	[[ -n $pid && $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-nspawn ]] ||
		die "grow: $1 is not running (no nspawn at pid '$pid'); run 'scripts/kubeadm.sh down' and up again"
	QK_TEMPLATE='' QK_BINDS=()
	while IFS= read -r a; do
		case $prev:$a in
		-D:*) QK_TEMPLATE=$a ;;
		*:--bind-ro=/dev/kmsg) ;;
		*:--bind-ro=*) QK_BINDS+=("$a") ;;
		esac
		prev=$a
	done < <(tr '\0' '\n' <"/proc/$pid/cmdline")
	[[ -d $QK_TEMPLATE && ${#QK_BINDS[@]} -gt 0 ]] || die "grow: cannot read the template and binds from $1's nspawn (pid $pid); run 'scripts/kubeadm.sh down' and up again"
}

# grow_routes_to NAME INDEX: every running node reaches the new node's pod
# subnet through its address (a route now, and in its networkd file, as up
# writes it) and knows its name (/etc/hosts). Idempotent.
grow_routes_to() {
	local name=$1 k=$2 n
	while read -r n _; do
		grep -q "^$n " "$QK_STATE/grow/new" && continue
		node_exec "$n" sh -c 'f=/etc/systemd/network/80-container-host0.network
			ip route replace "$3" via "$2" || exit 1
			grep -qxF "Destination=$3" "$f" || printf "\n[Route]\nDestination=%s\nGateway=%s\n" "$3" "$2" >>"$f"
			grep -qxF "$2 $1" /etc/hosts || echo "$2 $1" >>/etc/hosts' sh "$name" "$(node_ip "$k")" "$(node_podcidr "$k")" </dev/null ||
			die "grow: adding the route to $name's pod subnet on $n failed"
	done < <(state_layout)
}

# grow_boot NAME INDEX: the new node booting (node_boot); one that runs is
# kept, one whose start was cut short (not running, never joined) is made
# again from nothing.
grow_boot() {
	local name=$1
	if node_leader "$name" >/dev/null; then
		log "grow: $name runs already (an earlier grow started it)"
		return 0
	fi
	if [[ -d $(node_dir "$name") ]]; then
		node_kill "$name"
		rm -rf "$(node_dir "$name")"
	fi
	node_boot "$name" "$2"
}

# grow_upload_certs CP prints a fresh certificate key under which CP has
# uploaded the control-plane certificates (kubeadm-certs Secret, 2 h): its
# init configuration with that key, through `kubeadm init phase upload-certs`
# (--certificate-key cannot be mixed with --config).
grow_upload_certs() {
	local cp=$1 key
	key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	node_exec "$cp" sh -c 'sed -E "s/^certificateKey: .*/certificateKey: \"$1\"/" /etc/kubernetes/qk-kubeadm.yaml >/etc/kubernetes/qk-upload-certs.yaml &&
		grep -qx "certificateKey: \"$1\"" /etc/kubernetes/qk-upload-certs.yaml' sh "$key" ||
		die "grow: $cp has no init configuration with a certificateKey (/etc/kubernetes/qk-kubeadm.yaml); was it made by scripts/kubeadm.sh up?"
	node_exec "$cp" kubeadm init phase upload-certs --upload-certs --config /etc/kubernetes/qk-upload-certs.yaml >"$(node_dir "$cp")/upload-certs.log" 2>&1 ||
		die "kubeadm init phase upload-certs on $cp failed; last lines of $(node_dir "$cp")/upload-certs.log:
$(tail -n 15 "$(node_dir "$cp")/upload-certs.log")"
	echo "$key"
}

# grow_token CP prints a fresh bootstrap token made on CP (valid 2 h).
grow_token() {
	local token
	token=$(node_exec "$1" kubeadm token create --ttl 2h 2>"$(node_dir "$1")/token.log")
	[[ $token =~ ^[a-z0-9]{6}\.[a-z0-9]{16}$ ]] || die "kubeadm token create on $1 failed; see $(node_dir "$1")/token.log"
	echo "$token"
}

# grow_join NAME TOKEN KEY: NAME joined as a control plane, once: a node
# marked joined is left alone; one whose join was cut short is reset first.
grow_join() {
	local name=$1
	[[ -e $(node_dir "$name")/joined ]] && { log "grow: $name joined in an earlier grow"; return 0; }
	if node_exec "$name" sh -c 'test -e /etc/kubernetes/kubelet.conf || test -e /etc/kubernetes/bootstrap-kubelet.conf || test -n "$(ls -A /etc/kubernetes/manifests 2>/dev/null)"'; then
		log "grow: $name's join was cut short: kubeadm reset -f, then join again"
		node_exec "$name" kubeadm reset -f --cri-socket unix:///run/containerd/containerd.sock >"$(node_dir "$name")/reset.log" 2>&1 ||
			die "kubeadm reset on $name failed; see $(node_dir "$name")/reset.log, or run 'scripts/kubeadm.sh down'"
	fi
	kubeadm_join "$name" "$2" "$3"
	: >"$(node_dir "$name")/joined"
}

# lb_update: haproxy's backends are every control plane that has joined
# (grow_existing_cps and the new ones marked joined): haproxy.cfg rewritten
# in the LB and haproxy reloaded (connections open keep their server).
lb_update() {
	local lb n k want
	lb=$(lb_name)
	{
		for n in $(grow_existing_cps); do echo "$n $(cat "$(node_dir "$n")/ip")"; done
		while read -r n k; do
			if [[ -e $(node_dir "$n")/joined ]]; then echo "$n $(node_ip "$k")"; fi
		done <"$QK_STATE/grow/new"
	} | sort -V >"$QK_STATE/grow/backends"
	want=$(wc -l <"$QK_STATE/grow/backends")
	lb_haproxy_cfg <"$QK_STATE/grow/backends" | node_exec "$lb" sh -c 'cat >/etc/haproxy/haproxy.cfg.tmp && mv /etc/haproxy/haproxy.cfg.tmp /etc/haproxy/haproxy.cfg' ||
		die "grow: writing haproxy.cfg in $lb failed"
	node_exec "$lb" systemctl reload haproxy || die "grow: haproxy reload in $lb failed; see: scripts/kubeadm.sh exec $lb journalctl -u haproxy"
	wait_for 30 "haproxy in $lb to list $want API servers" lb_lists "$lb" "$want" ||
		die "grow: haproxy in $lb does not list the $want API servers after its reload: $(lb_servers "$lb" | tr '\n' ' ')"
}

# lb_lists LB N: haproxy lists N API servers (in any state).
lb_lists() { (($(lb_servers "$1" | wc -l) == $2)); }
