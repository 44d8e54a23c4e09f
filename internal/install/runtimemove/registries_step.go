package runtimemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// planRegistries is the preflight's part for the carry-registries step: containerd's
// registry settings read and merged with runtime.toml, checked, nothing written. Only
// containerd's configuration is read: another old runtime carries nothing over.
func (p Paths) planRegistries(oldRuntime string) (carryPlan, error) {
	cur, err := os.ReadFile(p.RuntimeConfig)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return carryPlan{}, fmt.Errorf("read %s: %w", p.RuntimeConfig, err)
	}
	c := &carried{}
	if oldRuntime == "containerd" {
		if c, err = readContainerd(p.ContainerdConfig); err != nil {
			return carryPlan{}, err
		}
	}
	from := strings.Join(c.From, ", ")
	cp, err := planCarry(c, cur, from)
	if err != nil {
		return carryPlan{}, fmt.Errorf("%v; nothing was changed", err)
	}
	if len(cp.Notes) == 0 {
		switch {
		case oldRuntime != "containerd":
			cp.Notes = []string{"nothing to carry: the old runtime is " + oldRuntime + ", whose registry settings are not read"}
		case len(c.From) == 0:
			cp.Notes = []string{"nothing to carry: " + p.ContainerdConfig + " does not exist (containerd's defaults)"}
		default:
			cp.Notes = []string{"nothing to carry: " + from + " names no registry settings or sandbox image"}
		}
	}
	return cp, nil
}

// carryImpact is the plan's line for the step.
func (m *Mover) carryImpact() string {
	if m.meta == nil || m.meta.Carry == nil {
		return "none: containerd's registry settings and sandbox image are carried into the runtime's configuration"
	}
	if m.meta.Carry.Block == "" {
		return "none: " + strings.Join(m.meta.Carry.Notes, "; ")
	}
	return "none: " + m.Paths.RuntimeConfig + " gets what containerd pulled with: " + strings.Join(m.meta.Carry.Notes, "; ")
}

// carryDo writes the carried-over block at the top of runtime.toml. The file's bytes
// before the first change are saved under StateDir (once per install: a recovering
// run keeps the first copy), and the new bytes are computed from that copy, so a
// rerun writes the same bytes. Writing nothing new is a no-op.
func (m *Mover) carryDo(ctx context.Context) error {
	var block string
	var notes []string
	secrets := false
	if m.meta.Carry != nil {
		block, secrets, notes = m.meta.Carry.Block, m.meta.Carry.Secrets, m.meta.Carry.Notes
	}
	orig, absent, err := m.savedRuntimeConfig()
	if err != nil {
		return err
	}
	next := append([]byte(block), stripCarried(orig)...)
	if bytes.Equal(next, orig) {
		fmt.Fprintf(m.Out, "  %s unchanged\n", m.Paths.RuntimeConfig)
		return nil
	}
	if err := m.saveRuntimeConfig(orig, absent); err != nil {
		return err
	}
	mode := fileMode(m.Paths.RuntimeConfig)
	if secrets {
		mode = 0o600
	}
	if err := os.MkdirAll(filepath.Dir(m.Paths.RuntimeConfig), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(m.Paths.RuntimeConfig), err)
	}
	if err := staticpod.WriteAtomic(m.Paths.RuntimeConfig, next, mode); err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  %s: %s\n", m.Paths.RuntimeConfig, strings.Join(notes, "; "))
	return nil
}

// savedRuntimeConfig returns the bytes of runtime.toml before this install changed
// it: the saved copy if there is one, else the file as it is now.
func (m *Mover) savedRuntimeConfig() ([]byte, bool, error) {
	if b, err := os.ReadFile(m.Paths.savedRuntimeConfig()); err == nil {
		return b, false, nil
	}
	if _, err := os.Stat(m.Paths.savedRuntimeConfigAbsent()); err == nil {
		return nil, true, nil
	}
	b, err := os.ReadFile(m.Paths.RuntimeConfig)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", m.Paths.RuntimeConfig, err)
	}
	return b, false, nil
}

// saveRuntimeConfig keeps the original bytes (or that there was no file), once; the
// copy has the original's mode, which carryUndo gives back.
func (m *Mover) saveRuntimeConfig(orig []byte, absent bool) error {
	if _, err := os.Stat(m.Paths.savedRuntimeConfig()); err == nil {
		return nil
	}
	if _, err := os.Stat(m.Paths.savedRuntimeConfigAbsent()); err == nil {
		return nil
	}
	if err := os.MkdirAll(m.Paths.savedDir(), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", m.Paths.savedDir(), err)
	}
	if absent {
		return os.WriteFile(m.Paths.savedRuntimeConfigAbsent(), nil, 0o600)
	}
	return staticpod.WriteAtomic(m.Paths.savedRuntimeConfig(), orig, fileMode(m.Paths.RuntimeConfig))
}

// carryUndo puts runtime.toml back byte for byte (or removes it if there was none);
// never saved means never changed.
func (m *Mover) carryUndo(ctx context.Context) error {
	if b, err := os.ReadFile(m.Paths.savedRuntimeConfig()); err == nil {
		return staticpod.WriteAtomic(m.Paths.RuntimeConfig, b, fileMode(m.Paths.savedRuntimeConfig()))
	}
	if _, err := os.Stat(m.Paths.savedRuntimeConfigAbsent()); err == nil {
		if err := os.Remove(m.Paths.RuntimeConfig); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", m.Paths.RuntimeConfig, err)
		}
	}
	return nil
}
