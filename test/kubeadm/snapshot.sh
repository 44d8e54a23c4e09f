#!/usr/bin/env bash
# snapshot.sh DIR: record what a cluster could leave behind on this host, one
# file per aspect, in a form that does not change by itself over time:
# iptables rules (no counters), links, addresses, routes and rules, mounts,
# network namespaces, sysctls (minus the ones that move on their own), cgroup
# directories and node processes. Compare two snapshots with `diff -r`.
#
# QK_SNAPSHOT_IGNORE, an extended regex, drops matching lines from every file:
# for a shared development host where other work makes its own links or
# cgroups meanwhile (e.g. 'qkcrit|veth[0-9a-f]{8}'). Leave it empty in CI.
set -euo pipefail
out=${1:?usage: test/kubeadm/snapshot.sh DIR}
mkdir -p "$out"
trap 'if [[ -n ${QK_SNAPSHOT_IGNORE:-} ]]; then for f in "$out"/*; do grep -Ev "$QK_SNAPSHOT_IGNORE" "$f" >"$f.tmp" || true; mv "$f.tmp" "$f"; done; fi' EXIT

for t in filter nat mangle raw; do
	iptables-save -t "$t" 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
done >"$out/iptables"
for t in filter nat mangle raw; do
	ip6tables-save -t "$t" 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
done >"$out/ip6tables"
ip -br link | awk '{print $1, $3}' | sort >"$out/links"
ip -br addr | sed -E 's/ +(UP|DOWN|UNKNOWN) +/ /' | sort >"$out/addrs"
{ ip -4 route show table all; ip -6 route show table all; ip -4 rule; ip -6 rule; } | sort >"$out/routes"
awk '{print $5, $(NF-2), $(NF-1)}' /proc/self/mountinfo | sort >"$out/mounts"
{ ip netns list 2>/dev/null; ls -1 /run/netns 2>/dev/null || true; } | sort >"$out/netns"
# Keys that change on their own (counters, random values, clocks).
sysctl -a 2>/dev/null | grep -Ev '^(kernel\.random\.|kernel\.ns_last_pid|kernel\.pty\.nr|fs\.(dentry-state|inode-nr|inode-state|file-nr|aio-nr|quota\.)|net\.netfilter\.nf_conntrack_count|kernel\.sched_domain|dev\.cdrom|kernel\.tainted|net\.ipv6\.conf\..*\.stable_secret|fs\.binfmt_misc)' |
	sort >"$out/sysctls"
# The machine's own process launcher makes and removes a cgroup per command
# under process_api/; those come and go with every shell, not with the cluster.
find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | grep -v '/process_api/' | sort >"$out/cgroups"
# live processes of the test's cluster: every process in a cgroup named
# qk-$QK_CLUSTER (its nspawn launchers, its nodes and their pods); a zombie
# has left its cgroup, so one waiting for PID 1 to reap it does not count.
{
	# grep exits 1 with no match and 2 when a process ends mid-scan: neither is an error here.
	{ grep -l "/qk-${QK_CLUSTER:-qk}/" /proc/[0-9]*/cgroup 2>/dev/null || true; } | cut -d/ -f3 | while read -r p; do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null && echo
	done
} | { grep -v '^$' || true; } | sort >"$out/node-processes"
