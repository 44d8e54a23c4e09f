package runtimemove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	rtconfig "github.com/quantyroot/quantykube/internal/runtime/config"
)

// meta is what preflight learnt, kept in StateDir so that a recovering run
// and undo act on the same facts as the run that changed the node.
type meta struct {
	Node         string   `json:"node"`
	OldEndpoint  string   `json:"oldEndpoint"`
	OldRuntime   string   `json:"oldRuntime"`
	NewEndpoint  string   `json:"newEndpoint"`
	CgroupDriver string   `json:"cgroupDriver"`
	Annotation   *string  `json:"annotation,omitempty"` // the cri-socket annotation, nil when absent
	Images       []string `json:"images"`
	Restart      []string `json:"restart"` // pods that restart (static and DaemonSet)
	RootDir      string   `json:"rootDir"` // the new runtime's root dir
	// Carry is what carry-registries writes into the runtime's configuration (the
	// block may hold credentials: this file is 0600 in a 0700 directory).
	Carry *carryPlan `json:"carry,omitempty"`
}

func (p Paths) writeMeta(m *meta) error {
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.MkdirAll(p.StateDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", p.StateDir, err)
	}
	tmp := p.metaFile() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	return os.Rename(tmp, p.metaFile())
}

func (p Paths) readMeta() (*meta, error) {
	b, err := os.ReadFile(p.metaFile())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w; the install's record is gone", p.metaFile(), err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("parse %s: %w", p.metaFile(), err)
	}
	return &m, nil
}

// preflight checks everything install runtime needs and changes nothing.
// With beforeDrain it skips the one check that needs the node drained (the
// operator runs it before it cordons the node).
func (p Paths) preflight(ctx context.Context, node string, beforeDrain bool) (*meta, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("install runtime must run as root on the node (try sudo)")
	}
	k, err := p.readKubelet()
	if err != nil {
		return nil, err
	}
	rc, err := rtconfig.Load(p.RuntimeConfig)
	if err != nil {
		return nil, err
	}
	newEndpoint := "unix://" + rc.Socket
	if k.Endpoint == newEndpoint {
		return nil, errors.New("the kubelet already runs on quantykube runtime; nothing to install (use `quantykube undo runtime` to go back)")
	}
	if err := checkCgroups(k, p.KubeletConfig); err != nil {
		return nil, err
	}
	if err := checkCNI(rc); err != nil {
		return nil, err
	}
	if st, err := os.Stat(p.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("the quantykube binary %s is missing or not executable; install it there or pass --binary", p.Binary)
	}
	if _, err := exec.LookPath(rc.RuncPath); err != nil {
		return nil, fmt.Errorf("runc (%q) is not installed; install it (apt-get install runc) or set runc_path in %s", rc.RuncPath, p.RuntimeConfig)
	}
	if err := checkLayerFS(rc.RootDir); err != nil {
		return nil, err
	}
	old, err := runtimeName(ctx, k.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("%v; the current runtime must run during the move", err)
	}
	carry, err := p.planRegistries(old)
	if err != nil {
		return nil, err
	}
	cs, err := p.apiClient()
	if err != nil {
		return nil, err
	}
	pods, err := listNodePods(ctx, cs, node)
	if err != nil {
		return nil, fmt.Errorf("%v; is --node-name right?", err)
	}
	if len(pods.Other) > 0 && !beforeDrain {
		return nil, notDrained(node, pods.Other)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metaGet)
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", node, err)
	}
	m := &meta{Node: node, OldEndpoint: k.Endpoint, OldRuntime: old, NewEndpoint: newEndpoint, CgroupDriver: k.CgroupDriver,
		Images: append(pods.images(), carry.PauseImage), RootDir: rc.RootDir, Carry: &carry,
		Restart: append(podNames(pods.Static), podNames(pods.DaemonSet)...)}
	if v, ok := n.Annotations[criSocketAnnotation]; ok {
		m.Annotation = &v
	}
	return m, nil
}

// checkCgroups: cgroup v2, or v1 where the kubelet allows it.
func checkCgroups(k *kubeletSetup, cfgPath string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &fs); err != nil {
		return fmt.Errorf("statfs /sys/fs/cgroup: %w; cgroups are not mounted", err)
	}
	if fs.Type == unix.CGROUP2_SUPER_MAGIC {
		return nil
	}
	if k.FailCgroupV1 {
		return fmt.Errorf("this node has cgroup v1 and the kubelet refuses it (failCgroupV1 is not false in %s); use cgroup v2 or set failCgroupV1: false", cfgPath)
	}
	return nil
}

// checkCNI wants a network configuration and the plugins it names.
func checkCNI(rc rtconfig.Config) error {
	var confs []string
	for _, pat := range []string{"*.conflist", "*.conf", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(rc.CNIConfDir, pat))
		confs = append(confs, m...)
	}
	if len(confs) == 0 {
		return fmt.Errorf("no CNI configuration in %s; install the node's network plugin first", rc.CNIConfDir)
	}
	b, err := os.ReadFile(confs[0])
	if err != nil {
		return fmt.Errorf("read CNI config %s: %w", confs[0], err)
	}
	var doc struct {
		Type    string `json:"type"`
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("CNI config %s is not JSON: %w", confs[0], err)
	}
	types := []string{doc.Type}
	for _, pl := range doc.Plugins {
		types = append(types, pl.Type)
	}
	for _, t := range types {
		if t == "" {
			continue
		}
		found := false
		for _, d := range rc.CNIBinDirs {
			if _, err := os.Stat(filepath.Join(d, t)); err == nil {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("CNI plugin %q (named by %s) is in none of %s; install the CNI plugins", t, confs[0], strings.Join(rc.CNIBinDirs, ", "))
		}
	}
	return nil
}

// overlayfsMagic is OVERLAYFS_SUPER_MAGIC.
const overlayfsMagic = 0x794c7630

// checkLayerFS refuses a root dir on overlayfs: container upper dirs cannot
// live on an overlay.
func checkLayerFS(dir string) error {
	d := dir
	for {
		if _, err := os.Stat(d); err == nil {
			break
		}
		if parent := filepath.Dir(d); parent != d {
			d = parent
		} else {
			break
		}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(d, &fs); err != nil {
		return fmt.Errorf("statfs %s: %w", d, err)
	}
	if fs.Type == overlayfsMagic {
		return fmt.Errorf("the runtime's root dir %s is on overlayfs, where container layers cannot live; mount a real filesystem (ext4, xfs or tmpfs) there or set root_dir in the runtime config", dir)
	}
	return nil
}
