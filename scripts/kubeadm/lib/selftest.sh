# shellcheck shell=bash
# selftest.sh: `selftest [plain|ha|crash|crash-ha|twice|grow|crash-grow]` checks that `down` leaves the host as it
# found it (test/kubeadm/down_test.sh does the work; see there).

cmd_selftest() {
	exec "$QK_ROOT/test/kubeadm/down_test.sh" "$@"
}
