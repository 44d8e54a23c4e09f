# shellcheck shell=bash
# down.sh: remove everything `up` made, from the state directory alone.
# Idempotent, and safe after a crash at any point of `up`: each step checks
# what exists before removing it, and the state is deleted last.

cmd_down() {
	require_host
	# Best effort: one step failing must not stop the others (set -e off here).
	set +e
	local n f upid
	# a running `up` or `grow` would keep making things while we remove them
	for f in up grow; do
		upid=$(running_pid "$QK_STATE/$f.pid") || continue
		log "stopping the running '$f' (pid $upid) and its children"
		kill_tree "$upid"
	done
	for n in $(state_nodes); do
		log "removing node $n"
		node_kill "$n"
		if node_cgroups_gone "$n"; then rm -rf "$(node_dir "$n")"; else log "warning: node $n keeps cgroups; kept $(node_dir "$n")"; fi
	done
	if [[ -f $QK_STATE/host/cgroups ]]; then
		local cg
		for cg in $(sort -r "$QK_STATE/host/cgroups"); do
			[[ -d $cg ]] && { find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || log "warning: cgroup $cg not removed"; }
		done
		local left=0
		for cg in $(cat "$QK_STATE/host/cgroups"); do [[ -d $cg ]] && left=1; done
		((left)) || rm -f "$QK_STATE/host/cgroups"
	fi
	registry_down
	net_down
	template_build_cleanup
	host_unregister
	if [[ -n $(ls -A "$QK_STATE/host" 2>/dev/null) || -n $(state_nodes) ]]; then
		die "down: could not undo everything; left: $(ls "$QK_STATE/host" 2>/dev/null | tr '\n' ' ')$(state_nodes | tr '\n' ' ')(see the warnings above; run 'scripts/kubeadm.sh down' again)"
	fi
	rm -rf "$QK_STATE"
	set -e
	log "down: nothing of the cluster is left on the host"
}

# running_pid FILE prints the pid FILE records when it is a kubeadm.sh still
# running (not this one), or fails.
running_pid() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 1
	[[ -n $pid && $pid != "$$" && -d /proc/$pid ]] && grep -q kubeadm.sh "/proc/$pid/cmdline" 2>/dev/null || return 1
	echo "$pid"
}

# kill_tree PID: SIGKILL PID and all its descendants, children first found.
kill_tree() {
	local c
	kill -STOP "$1" 2>/dev/null || true
	for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
	kill -9 "$1" 2>/dev/null || true
}

node_cgroups_gone() {
	local cg
	[[ -f $(node_dir "$1")/cgroups ]] || return 0
	for cg in $(cat "$(node_dir "$1")/cgroups"); do [[ -d $cg ]] && return 1; done
	return 0
}
