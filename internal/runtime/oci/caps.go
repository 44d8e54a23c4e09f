package oci

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultCaps is the capability set of an unprivileged container (containerd's and Docker's default).
var DefaultCaps = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// capNames is indexed by capability number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// BoundingCaps is every capability this process holds in its bounding set: "all" for a
// privileged container can be no more than that (here CAP_SYS_RESOURCE is missing).
func BoundingCaps() []string {
	last := len(capNames) - 1
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < last {
			last = n
		}
	}
	var bnd uint64 = ^uint64(0)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
				bnd, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			}
		}
	}
	var out []string
	for i := 0; i <= last; i++ {
		if bnd&(1<<uint(i)) != 0 {
			out = append(out, capNames[i])
		}
	}
	return out
}

// normalizeCap turns "net_admin" or "NET_ADMIN" into "CAP_NET_ADMIN".
func normalizeCap(c string) string {
	c = strings.ToUpper(c)
	if !strings.HasPrefix(c, "CAP_") {
		c = "CAP_" + c
	}
	return c
}

// Capabilities computes the set from add/drop lists, where "ALL" means the bounding set.
// Drops are applied before adds, so "drop ALL, add X" gives exactly X.
func Capabilities(base []string, add, drop []string) ([]string, error) {
	set := map[string]bool{}
	for _, c := range base {
		set[c] = true
	}
	known := map[string]bool{}
	for _, c := range capNames {
		known[c] = true
	}
	for _, c := range drop {
		if strings.EqualFold(c, "ALL") {
			set = map[string]bool{}
			continue
		}
		delete(set, normalizeCap(c))
	}
	bounding := BoundingCaps()
	for _, c := range add {
		if strings.EqualFold(c, "ALL") {
			for _, b := range bounding {
				set[b] = true
			}
			continue
		}
		n := normalizeCap(c)
		if !known[n] {
			return nil, fmt.Errorf("unknown capability %q: use a name like NET_ADMIN", c)
		}
		set[n] = true
	}
	out := []string{}
	for _, c := range capNames {
		if set[c] {
			out = append(out, c)
		}
	}
	return out, nil
}
