#!/usr/bin/env bash
# crash.sh SUBCOMMAND [ARGS...]: start `scripts/kubeadm.sh SUBCOMMAND ARGS`
# (up or grow) and kill it with kill -9 — its whole process group, as a
# crash or a CI timeout would — once its log says its nodes booted, plus
# QK_CRASH_DELAY seconds (default 3). QK_CRASH_AT, an extended regex, is
# the log line to wait for instead (default 'nodes booted'; e.g. 'joined'
# for a grow killed after its first join). Succeeds only when the command
# was killed there with nodes running (not ended on its own, not before);
# what it left is the caller's: run the command again over it, or down.
# Used by down_test.sh's crash modes and by scripts/test.sh.
set -uo pipefail
[[ $# -ge 1 ]] || { echo "usage: test/kubeadm/crash.sh up|grow [ARGS...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
state=${QK_STATE:-${QK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quantykube}/kubeadm/state}
at=${QK_CRASH_AT:-nodes booted}
log=$(mktemp /tmp/qk-crash.XXXXXX)
setsid "$root/scripts/kubeadm.sh" "$@" >"$log" 2>&1 &
pid=$!
reached() { compgen -G "$state/nodes/*/console.log" >/dev/null && grep -qE "$at" "$log"; }
for _ in $(seq 1 1800); do
	reached && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 1
done
running=true
kill -0 "$pid" 2>/dev/null || running=false
sleep "${QK_CRASH_DELAY:-3}"
kill -9 -- "-$pid" 2>/dev/null
wait "$pid" 2>/dev/null
echo "killed '$*' (pid $pid) after: $(tail -n 1 "$log")"
ok=true
reached || { ok=false; echo "it never logged /$at/ (its log: $log)"; }
$running || { ok=false; echo "it ended on its own before the kill; last lines:"; tail -n 15 "$log"; }
$ok && rm -f "$log"
$ok
