// Package monitor is the per-container process that outlives the runtime.
//
// The runtime re-executes its own binary as `quantykube runtime monitor ...`. The monitor
// becomes a child subreaper, runs `runc create` with stdio it owns, reports the result on
// fd 3 (the sync pipe), then: copies the container's output into the CRI log at LogPath,
// serves attach clients on attach.sock, reaps the container's init and records its exit
// status in exit.json. It exits after the container did. Killing the runtime does not
// disturb it: it runs in its own session and holds no fd of the runtime.
package monitor

// Options is the monitor's command line.
type Options struct {
	ID        string
	Bundle    string
	Dir       string // the container's state directory (exit.json, attach.sock, pid)
	LogPath   string // CRI log file; empty means discard output
	Runc      string
	RuncRoot  string
	Terminal  bool
	Stdin     bool
	StdinOnce bool
	// CgroupMemoryDir, when set, is read at exit to tell an OOM kill (v1 memory.oom_control or v2 memory.events).
	CgroupMemoryDir string
}

// Args renders o as the monitor subcommand's flags.
func (o Options) Args() []string {
	a := []string{"--id", o.ID, "--bundle", o.Bundle, "--dir", o.Dir, "--log-path", o.LogPath,
		"--runc", o.Runc, "--runc-root", o.RuncRoot, "--cgroup-memory-dir", o.CgroupMemoryDir}
	if o.Terminal {
		a = append(a, "--terminal")
	}
	if o.Stdin {
		a = append(a, "--stdin")
	}
	if o.StdinOnce {
		a = append(a, "--stdin-once")
	}
	return a
}
