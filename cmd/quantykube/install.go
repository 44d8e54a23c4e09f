package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/hamove"
	"github.com/quantyroot/quantykube/internal/install/runtimemove"
	"github.com/quantyroot/quantykube/internal/install/storemove"
)

func newInstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Move this node onto QuantyKube (root; every step journaled, put back on failure)",
	}
	cmd.AddCommand(newStoreMoveCommand(false), newRuntimeMoveCommand(false))
	return cmd
}

func newUndoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "undo",
		Short: "Move this node back to what it ran before QuantyKube",
	}
	cmd.AddCommand(newStoreMoveCommand(true), newRuntimeMoveCommand(true))
	return cmd
}

// mover installs or undoes one subject on this host.
type mover interface {
	Install(ctx context.Context, dryRun bool) error
	Undo(ctx context.Context, dryRun bool) error
}

// newMoveCommand builds `install SUBJECT` or `undo SUBJECT`: the flags every
// subject has (--dry-run, --log-level), the subject's own (addFlags), and
// the mover made once the flags are parsed.
func newMoveCommand(use, short string, undo bool, addFlags func(*pflag.FlagSet), newMover func(*slog.Logger, io.Writer, install.Faults) mover) *cobra.Command {
	var dryRun bool
	var logLevel string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			faults, err := install.FaultsFromEnv(log)
			if err != nil {
				return err
			}
			m := newMover(log, cmd.OutOrStdout(), faults)
			if undo {
				return m.Undo(cmd.Context(), dryRun)
			}
			return m.Install(cmd.Context(), dryRun)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "print the preflight verdict and the plan with each step's expected impact; change nothing")
	f.StringVar(&logLevel, "log-level", "warn", "debug, info, warn or error")
	addFlags(f)
	return cmd
}

// storeMover is the store's mover with its extra modes: --reattach and
// --verify for install, --keep-etcd for undo.
type storeMover struct {
	*storemove.Mover
	reattach, verify, keepEtcd bool
	// ha is the HA move's node step (--ha), with its node.
	ha     string
	haNode *hamove.Node
}

// haStep runs the --ha step (or status) on this node.
func (s storeMover) haStep(ctx context.Context, undo, dryRun bool) error {
	if s.ha == "status" {
		st, err := s.haNode.Status(ctx, undo)
		if err != nil {
			return err
		}
		st.Print(s.Out)
		return nil
	}
	if !hamove.KnownStep(s.ha, undo) {
		op, steps := "install", hamove.InstallSteps
		if undo {
			op, steps = "undo", hamove.UndoSteps
		}
		return fmt.Errorf("--ha %s is not a step of %s store; the steps are %s, and status", s.ha, op, strings.Join(steps, ", "))
	}
	return s.haNode.Run(ctx, s.ha, dryRun)
}

func (s storeMover) Install(ctx context.Context, dryRun bool) error {
	switch {
	case s.ha != "":
		return s.haStep(ctx, false, dryRun)
	case s.verify:
		if err := s.Verify(ctx); err != nil {
			return err
		}
		fmt.Fprintln(s.Out, "the store's recorded state stands")
		return nil
	case s.reattach:
		return s.Reattach(ctx, dryRun)
	}
	return s.Mover.Install(ctx, dryRun)
}

func (s storeMover) Undo(ctx context.Context, dryRun bool) error {
	if s.ha != "" {
		return s.haStep(ctx, true, dryRun)
	}
	if s.keepEtcd {
		return s.Release(ctx, dryRun)
	}
	return s.Mover.Undo(ctx, dryRun)
}

func newStoreMoveCommand(undo bool) *cobra.Command {
	p := storemove.DefaultPaths()
	var name, etcdutl string
	var modes storeMover
	hp := hamove.DefaultPaths()
	haNode := &hamove.Node{}
	short := "Move the API server of this kubeadm control-plane node from etcd onto quantykube store, keeping every revision"
	if undo {
		short = "Move the API server of this node back from quantykube store onto etcd"
	}
	return newMoveCommand("store", short, undo, func(f *pflag.FlagSet) {
		f.StringVar(&p.Manifests, "manifests", p.Manifests, "kubelet's static pod manifest directory")
		f.StringVar(&p.PKI, "pki", p.PKI, "kubeadm's PKI directory")
		f.StringVar(&p.StateDir, "state-dir", p.StateDir, "where the journal and the saved manifests are kept")
		f.StringVar(&p.DataDir, "data-dir", p.DataDir, "the store's data directory")
		f.StringVar(&p.Binary, "binary", p.Binary, "where the store's binary is installed for its systemd unit")
		f.StringVar(&p.Kubeconfig, "kubeconfig", p.Kubeconfig, "kubeadm's admin kubeconfig (kubeadm-config is edited with it)")
		f.StringVar(&name, "name", "", "the store's member name (default: the host name)")
		steps := hamove.InstallSteps
		if undo {
			steps = hamove.UndoSteps
			f.StringVar(&etcdutl, "etcdutl", "", "etcd's etcdutl binary, of the cluster's etcd version (default: with --ha replay-to and restore-etcd "+hp.Etcdutl+"; on one control plane the one in the running etcd's image)")
			f.StringVar(&haNode.Snapshot, "snapshot", "", "--ha restore-etcd: the store snapshot replay-to saved (default: its path under --ha-state-dir)")
		}
		f.StringVar(&modes.ha, "ha", "", "one node step of the move of a control plane of several nodes, run on each in the order `--ha status` names: "+strings.Join(steps, ", ")+"; or status")
		f.StringVar(&hp.StateDir, "ha-state-dir", hp.StateDir, "where the HA move's journals and saved files are kept")
		f.DurationVar(&haNode.HoldTimeout, "hold-timeout", 5*time.Second, "cutover/cutback (undo's cut-back on one control plane too): the longest write pause before the transition is abandoned")
		if undo {
			f.BoolVar(&modes.keepEtcd, "keep-etcd", false, "the API server was pointed back at etcd behind QuantyKube's back: keep etcd's data, stop the store and set its data aside (never deleted)")
		} else {
			f.BoolVar(&modes.reattach, "reattach", false, "the API server was pointed back at etcd behind QuantyKube's back: put it on the store again (etcd's writes since are dropped, saved to a snapshot file first)")
			f.BoolVar(&modes.verify, "verify", false, "only check that the state the journal records still holds (exit 1 with what happened and what to do if not); change nothing")
		}
	}, func(log *slog.Logger, out io.Writer, faults install.Faults) mover {
		modes.Mover = &storemove.Mover{Paths: p, Log: log, Out: out, NodeName: name, Faults: faults, Etcdutl: etcdutl, HoldTimeout: haNode.HoldTimeout}
		if etcdutl != "" {
			hp.Etcdutl = etcdutl
		}
		sd := hp.StateDir
		hp.Paths = p
		hp.StateDir = sd
		haNode.Paths, haNode.Log, haNode.Out, haNode.Faults = hp, log, out, faults
		modes.haNode = haNode
		return modes
	})
}

// runtimeMover is the runtime's mover with install --preflight.
type runtimeMover struct {
	*runtimemove.Mover
	preflightOnly bool
}

func (r runtimeMover) Install(ctx context.Context, dryRun bool) error {
	if r.preflightOnly {
		return r.Preflight(ctx)
	}
	return r.Mover.Install(ctx, dryRun)
}

func newRuntimeMoveCommand(undo bool) *cobra.Command {
	p := runtimemove.DefaultPaths()
	var name string
	var noPrepull, preflightOnly bool
	short := "Move the kubelet of this drained kubeadm node from its container runtime onto quantykube runtime"
	if undo {
		short = "Move the kubelet of this node back from quantykube runtime onto the runtime it ran on before"
	}
	return newMoveCommand("runtime", short, undo, func(f *pflag.FlagSet) {
		f.StringVar(&p.KubeletConfig, "kubelet-config", p.KubeletConfig, "the kubelet's KubeletConfiguration file")
		f.StringVar(&p.KubeletFlags, "kubelet-flags", p.KubeletFlags, "kubeadm's kubelet flags file")
		f.StringVar(&p.KubeletConf, "kubelet-kubeconfig", p.KubeletConf, "the kubelet's kubeconfig (the node's own API credentials)")
		f.StringVar(&p.StateDir, "state-dir", p.StateDir, "where the journal and the kubelet's original files are kept")
		f.StringVar(&p.Binary, "binary", p.Binary, "the quantykube binary the quantykube-runtime unit runs")
		f.StringVar(&p.RuntimeConfig, "runtime-config", p.RuntimeConfig, "quantykube runtime's configuration (TOML; defaults apply when absent)")
		f.StringVar(&p.ImageArchives, "image-archives", "", "a directory of docker-archive tarballs to import before copying images from the old runtime")
		if !undo {
			f.StringVar(&p.ContainerdConfig, "containerd-config", p.ContainerdConfig, "containerd's configuration, whose registry settings (config_path, mirrors, configs) and sandbox image are carried into --runtime-config (only read)")
		}
		f.StringVar(&name, "node-name", "", "the node's name in the API (default: the host name)")
		if !undo {
			f.BoolVar(&preflightOnly, "preflight", false, "only run the checks that hold before the node is drained; change nothing (the operator asks this before it cordons the node)")
			f.BoolVar(&noPrepull, "no-prepull", false, "do not copy the pods' images into quantykube runtime first: the static and DaemonSet pods pull them when they restart (for nodes with a nearby registry or mirror; their restart then includes the pull)")
		}
	}, func(log *slog.Logger, out io.Writer, faults install.Faults) mover {
		return runtimeMover{&runtimemove.Mover{Paths: p, Log: log, Out: out, NodeName: name, NoPrepull: noPrepull, Faults: faults}, preflightOnly}
	})
}
