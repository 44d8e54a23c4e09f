package cli

import "fmt"

// SystemdUnit returns the quantykube-runtime.service unit that runs binary with config.
//
// Invariants the unit must keep (the installer should not change them):
//   - KillMode=process: stopping or restarting the service signals only the runtime;
//     the monitors and containers in its cgroup keep running (the runtime recovers them).
//   - Delegate=yes: runc manages cgroups below the service's own.
//   - No OOMScoreAdjust and no Limit* raising hard limits: without CAP_SYS_RESOURCE
//     (these machines, nspawn nodes) systemd fails to start a unit that asks for them;
//     the runtime clamps containers' oom_score_adj to its own anyway.
func SystemdUnit(binary, config string) string {
	return fmt.Sprintf(`[Unit]
Description=QuantyKube container runtime (CRI)
Documentation=https://github.com/quantyroot/quantykube
After=network.target local-fs.target

[Service]
ExecStart=%s runtime --config %s
Type=simple
Restart=always
RestartSec=2
KillMode=process
Delegate=yes
TasksMax=infinity

[Install]
WantedBy=multi-user.target
`, binary, config)
}
