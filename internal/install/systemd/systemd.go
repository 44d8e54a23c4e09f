// Package systemd installs, starts and removes the systemd units QuantyKube
// runs as (quantykube-store, quantykube-runtime), through systemctl.
package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// UnitDir is where units are written.
const UnitDir = "/etc/systemd/system"

// Unit is a systemd service unit.
type Unit struct {
	Name    string // e.g. "quantykube-store"
	Content string // the whole unit file
}

// Path is the unit file's path.
func (u Unit) Path() string { return filepath.Join(UnitDir, u.Name+".service") }

func systemctl(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Available reports whether systemd runs this host (systemctl can talk to
// PID 1), with an error saying what is missing.
func Available(ctx context.Context) error {
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return errors.New("systemd is not running on this host (no /run/systemd/system); QuantyKube's units need systemd as PID 1")
	}
	if _, err := exec.LookPath("systemctl"); err != nil {
		return errors.New("systemctl not found; install systemd")
	}
	return nil
}

// Install writes the unit atomically, reloads systemd, and enables and
// starts the unit. It is idempotent.
func Install(ctx context.Context, u Unit) error {
	if err := Write(ctx, u); err != nil {
		return err
	}
	return systemctl(ctx, "enable", "--now", u.Name+".service")
}

// Write writes the unit atomically and reloads systemd, leaving it neither
// enabled nor started: Start and Enable then cost no reload (a second or
// more on a loaded node) where time counts. Idempotent.
func Write(ctx context.Context, u Unit) error {
	tmp := u.Path() + ".tmp"
	if err := os.WriteFile(tmp, []byte(u.Content), 0o644); err != nil {
		return fmt.Errorf("write unit %s: %w", u.Path(), err)
	}
	if err := os.Rename(tmp, u.Path()); err != nil {
		return fmt.Errorf("install unit %s: %w", u.Path(), err)
	}
	return systemctl(ctx, "daemon-reload")
}

// Start starts a written unit (no reload, not enabled).
func Start(ctx context.Context, name string) error {
	return systemctl(ctx, "start", name+".service")
}

// Stop stops a unit (it stays enabled); stopping a stopped unit is fine.
func Stop(ctx context.Context, name string) error {
	return systemctl(ctx, "stop", name+".service")
}

// Enable makes a written unit start at boot; it does not start it.
func Enable(ctx context.Context, name string) error {
	return systemctl(ctx, "enable", name+".service")
}

// Remove stops and disables the unit and deletes its file. Idempotent: a
// unit that is not there is fine.
func Remove(ctx context.Context, name string) error {
	path := filepath.Join(UnitDir, name+".service")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = systemctl(ctx, "disable", "--now", name+".service")
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove unit %s: %w", path, err)
	}
	return systemctl(ctx, "daemon-reload")
}

// Active reports whether the unit is active.
func Active(ctx context.Context, name string) bool {
	return exec.CommandContext(ctx, "systemctl", "is-active", "--quiet", name+".service").Run() == nil
}
