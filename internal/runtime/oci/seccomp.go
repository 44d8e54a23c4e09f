package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeDefaultDenied are the syscalls the RuntimeDefault profile refuses with EPERM:
// Docker's default profile expressed as a deny list (kernel module, clock, keyring, mount,
// namespace, tracing and reboot calls). Everything else is allowed.
var runtimeDefaultDenied = []string{
	"acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module", "delete_module",
	"finit_module", "get_kernel_syms", "get_mempolicy", "init_module", "ioperm", "iopl", "kcmp",
	"kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mbind", "mount", "move_mount",
	"open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "move_pages", "name_to_handle_at",
	"nfsservctl", "open_by_handle_at", "perf_event_open", "pivot_root", "process_vm_readv",
	"process_vm_writev", "ptrace", "query_module", "quotactl", "reboot", "request_key",
	"set_mempolicy", "setns", "settimeofday", "stime", "swapoff", "swapon", "sysfs", "_sysctl",
	"umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vm86", "vm86old",
}

// RuntimeDefaultSeccomp returns the RuntimeDefault profile.
func RuntimeDefaultSeccomp() *specs.LinuxSeccomp {
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32, specs.ArchAARCH64, specs.ArchARM},
		Syscalls: []specs.LinuxSyscall{{
			Names:    runtimeDefaultDenied,
			Action:   specs.ActErrno,
			ErrnoRet: func() *uint { v := uint(1); return &v }(),
		}},
	}
}

// Seccomp resolves a CRI security profile: nil or Unconfined gives no filter, RuntimeDefault
// the profile above, Localhost the OCI seccomp JSON at the given absolute path.
func Seccomp(p *runtimeapi.SecurityProfile) (*specs.LinuxSeccomp, error) {
	if p == nil {
		return nil, nil
	}
	switch p.ProfileType {
	case runtimeapi.SecurityProfile_Unconfined:
		return nil, nil
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return RuntimeDefaultSeccomp(), nil
	case runtimeapi.SecurityProfile_Localhost:
		path := strings.TrimPrefix(p.LocalhostRef, "localhost/")
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("seccomp localhost profile %q must be an absolute path", p.LocalhostRef)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read seccomp profile %s: %w", path, err)
		}
		var s specs.LinuxSeccomp
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("parse seccomp profile %s: %w", path, err)
		}
		return &s, nil
	}
	return nil, fmt.Errorf("seccomp profile type %v is not supported", p.ProfileType)
}
