# shellcheck shell=bash
# net.sh: the host side of the node network: one bridge with a private /24
# (the host is .1) and one iptables chain, first in FORWARD, that lets traffic
# flow between nodes on the bridge and drops anything else to or from it (the
# nodes have no way out of this machine).

# check_net_free fails when the bridge's subnet is already routed here.
check_net_free() {
	if ip -o link show dev "$QK_BRIDGE" >/dev/null 2>&1; then
		die "a link named $QK_BRIDGE already exists; run 'scripts/kubeadm.sh down' or pick another with QK_BRIDGE=..."
	fi
	local r
	r=$(ip -4 route show to match "$QK_NODE_NET.1/32" 2>/dev/null | grep -v '^default' || true)
	[[ -z $r ]] || die "subnet $QK_NODE_NET.0/24 is already in use on this host ($r); pick another with QK_NODE_NET=a.b.c"
}

net_up() {
	check_net_free
	mkdir -p "$QK_STATE/host"
	echo "$QK_BRIDGE" >"$QK_STATE/host/bridge"
	ip link add "$QK_BRIDGE" type bridge || die "create bridge $QK_BRIDGE failed"
	ip addr add "$QK_NODE_NET.1/24" dev "$QK_BRIDGE"
	ip link set "$QK_BRIDGE" up
	echo "$QK_CHAIN" >"$QK_STATE/host/chain"
	iptables -w -N "$QK_CHAIN" 2>/dev/null || iptables -w -F "$QK_CHAIN"
	iptables -w -A "$QK_CHAIN" -i "$QK_BRIDGE" -o "$QK_BRIDGE" -j ACCEPT
	iptables -w -A "$QK_CHAIN" -i "$QK_BRIDGE" -j DROP
	iptables -w -A "$QK_CHAIN" -o "$QK_BRIDGE" -j DROP
	iptables -w -C FORWARD -j "$QK_CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$QK_CHAIN"
}

# net_down removes the bridge, leftover node veths on it and the chain; it
# reads their names from the state, so it needs no parameters.
net_down() {
	local br chain l
	br=$(cat "$QK_STATE/host/bridge" 2>/dev/null || true)
	chain=$(cat "$QK_STATE/host/chain" 2>/dev/null || true)
	if [[ -n $br ]] && ip link show dev "$br" >/dev/null 2>&1; then
		for l in $(ip -o link show master "$br" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
			ip link del "$l" 2>/dev/null || true
		done
		ip link del "$br" || log "warning: could not delete bridge $br"
	fi
	if [[ -z $br ]] || ! ip link show dev "$br" >/dev/null 2>&1; then rm -f "$QK_STATE/host/bridge"; fi
	if [[ -n $chain ]] && iptables -w -L "$chain" -n >/dev/null 2>&1; then
		while iptables -w -D FORWARD -j "$chain" 2>/dev/null; do :; done
		if ! { iptables -w -F "$chain" && iptables -w -X "$chain"; }; then log "warning: could not delete iptables chain $chain"; fi
	fi
	if [[ -z $chain ]] || ! iptables -w -L "$chain" -n >/dev/null 2>&1; then rm -f "$QK_STATE/host/chain"; fi
}
