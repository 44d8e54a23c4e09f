// Package runc drives the runc binary. Every method is one runc invocation; runc's own
// error text is returned inside the wrapped error so callers can report it verbatim.
package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Runc is a runc binary with its state root.
type Runc struct {
	// Path is the runc binary.
	Path string
	// Root is runc's --root; every container of this runtime lives under it.
	Root string
}

// ErrNotFound is returned by State/Kill/Delete when runc does not know the container.
var ErrNotFound = errors.New("container does not exist in runc")

// State is the subset of `runc state` the runtime uses.
type State struct {
	ID     string `json:"id"`
	Pid    int    `json:"pid"`
	Status string `json:"status"` // creating, created, running, paused, stopped
	Bundle string `json:"bundle"`
}

func (r *Runc) args(a ...string) []string {
	return append([]string{"--root", r.Root}, a...)
}

// Command returns an unstarted runc command, for callers (the monitor, exec) that wire stdio themselves.
func (r *Runc) Command(ctx context.Context, a ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.Path, r.args(a...)...)
}

func (r *Runc) run(ctx context.Context, a ...string) ([]byte, error) {
	cmd := r.Command(ctx, a...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "not found") && strings.Contains(msg, "container") {
			return nil, fmt.Errorf("runc %s: %s: %w", a[0], msg, ErrNotFound)
		}
		return nil, fmt.Errorf("runc %s: %s: %w", a[0], msg, err)
	}
	return stdout.Bytes(), nil
}

// Start runs the user process of a created container.
func (r *Runc) Start(ctx context.Context, id string) error {
	_, err := r.run(ctx, "start", id)
	return err
}

// Kill sends sig to the container's init (or every process with all).
func (r *Runc) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	a := []string{"kill"}
	if all {
		a = append(a, "--all")
	}
	_, err := r.run(ctx, append(a, id, fmt.Sprint(int(sig)))...)
	return err
}

// Delete removes runc's record (and its leaf cgroup). force kills a running container first.
func (r *Runc) Delete(ctx context.Context, id string, force bool) error {
	a := []string{"delete"}
	if force {
		a = append(a, "--force")
	}
	_, err := r.run(ctx, append(a, id)...)
	return err
}

// State returns runc's view of the container.
func (r *Runc) State(ctx context.Context, id string) (State, error) {
	var s State
	out, err := r.run(ctx, "state", id)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return s, fmt.Errorf("decode runc state %s: %w", id, err)
	}
	return s, nil
}

// Update changes a running container's resources.
func (r *Runc) Update(ctx context.Context, id string, res *specs.LinuxResources) error {
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode resources: %w", err)
	}
	cmd := r.Command(ctx, "update", "--resources", "-", id)
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("runc update %s: %s: %w", id, strings.TrimSpace(string(out)), err)
	}
	return nil
}

// ExecCommand returns an unstarted `runc exec` of process p (written to processFile).
// With consoleSocket set the process gets a terminal, delivered on that socket.
// The exec'd process's host pid is written to pidFile (to kill it on timeout: killing runc
// itself would leave the process running).
func (r *Runc) ExecCommand(ctx context.Context, id string, p *specs.Process, processFile, pidFile, consoleSocket string) (*exec.Cmd, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode process: %w", err)
	}
	if err := os.WriteFile(processFile, b, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", processFile, err)
	}
	a := []string{"exec", "--process", processFile, "--pid-file", pidFile}
	if consoleSocket != "" {
		// runc hands a terminal over only when detached; the caller reaps the process
		// (it must be a child subreaper).
		a = append(a, "--detach", "--console-socket", consoleSocket)
	}
	return r.Command(ctx, append(a, id)...), nil
}

// SupportsMountOption reports whether `runc features` lists opt (e.g. "rro") among its
// mount options. Old runc without the features command reports false.
func (r *Runc) SupportsMountOption(ctx context.Context, opt string) bool {
	out, err := r.Command(ctx, "features").Output()
	if err != nil {
		return false
	}
	var f struct {
		MountOptions []string `json:"mountOptions"`
	}
	if json.Unmarshal(out, &f) != nil {
		return false
	}
	for _, o := range f.MountOptions {
		if o == opt {
			return true
		}
	}
	return false
}
