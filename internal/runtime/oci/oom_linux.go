package oci

import (
	"os"
	"strconv"
	"strings"
)

// ClampOOMScoreAdj raises want to this process's own oom_score_adj when it is lower:
// lowering it needs CAP_SYS_RESOURCE, which runc would fail on (containerd's
// restrict_oom_score_adj). The result is also kept within [-1000, 1000].
func ClampOOMScoreAdj(want int) int {
	if want > 1000 {
		want = 1000
	}
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return want
	}
	own, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return want
	}
	if want < own {
		return own
	}
	return want
}
