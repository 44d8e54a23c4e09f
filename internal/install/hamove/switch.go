package hamove

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/storemove"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

func (n *Node) switchPlan() *install.Plan {
	return &install.Plan{Op: StepSwitch, Steps: []install.Step{
		{Name: "level", Impact: "none: waits until the local member has applied etcd's current revision",
			Do: n.waitLevel},
		{Name: "stop-apiserver", Impact: "this node's API server stops (the others keep serving; clients on this node's address fail over)",
			Do: n.stopAPIServerTo(n.Paths.savedAPIServer()), Undo: n.startSaved(n.Paths.savedAPIServer())},
		{Name: "start-apiserver", Impact: "this node's API server starts on its local store member (only --etcd-servers changes); writes go to etcd through the mirror",
			Do: n.startOn(n.Paths.savedAPIServer(), func() string { return n.Paths.LocalURL() })},
	}}
}

// switchBackPlan is switch the other way: the API server back on its local
// etcd member, with the manifest switch saved (or, without it, the one
// that ran on the store with --etcd-servers set back).
func (n *Node) switchBackPlan() *install.Plan {
	saved := filepath.Join(n.Paths.stepDir(StepSwitchBack), "kube-apiserver.store.yaml")
	return &install.Plan{Op: StepSwitchBack, Steps: []install.Step{
		{Name: "stop-apiserver", Impact: "this node's API server stops (the others keep serving)",
			Do: n.stopAPIServerTo(saved), Undo: n.startSaved(saved)},
		{Name: "start-apiserver", Impact: "this node's API server starts on its local etcd member again (its manifest as before the move)",
			Do: func(ctx context.Context) error {
				if b, err := os.ReadFile(n.Paths.savedAPIServer()); err == nil {
					if cur, err := os.ReadFile(saved); err == nil && sameBut(cur, b) {
						return n.startManifest(ctx, b)
					}
				}
				return n.startOn(saved, func() string { return n.Paths.localEtcd() })(ctx)
			}},
	}}
}

// sameBut reports whether the store manifest is the etcd one with only
// --etcd-servers changed (nothing re-rendered it meanwhile).
func sameBut(store, etcd []byte) bool {
	v, ok := staticpod.Flag(store, "etcd-servers")
	if !ok {
		return false
	}
	back, err := staticpod.SetFlag(etcd, "etcd-servers", v)
	return err == nil && string(back) == string(store)
}

func (n *Node) switchPreflight(ctx context.Context) error {
	if err := n.apiserverOn(n.Paths.localEtcd(), "it is on the store already: nothing to switch"); err != nil {
		return err
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.Mirror || st.Failed != "" {
		return fmt.Errorf("the store is in mode %s (failed: %q), not mirroring etcd: an API server switched now would not see etcd's writes; undo the move instead", st.Mode, st.Failed)
	}
	return nil
}

func (n *Node) switchBackPreflight(ctx context.Context) error {
	if err := n.apiserverOn(n.Paths.LocalURL(), "it is on etcd already: nothing to switch back"); err != nil {
		return err
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.Mirror {
		return fmt.Errorf("the store is in mode %s: run `quantykube undo store --ha %s` first (an API server on etcd now would miss the store's writes)", st.Mode, StepCutback)
	}
	return nil
}

// apiserverOn checks that the local API server's manifest names want as
// its etcd; otherwise the error says why (done says what it means when
// the manifest already names the other side).
func (n *Node) apiserverOn(want, done string) error {
	m, err := os.ReadFile(n.Paths.APIServerManifest())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s is missing: this node's API server is stopped (an interrupted switch? rerun the step that stopped it)", n.Paths.APIServerManifest())
		}
		return err
	}
	got, ok := staticpod.Flag(m, "etcd-servers")
	switch {
	case !ok:
		return fmt.Errorf("%s has no --etcd-servers flag; it is not a kubeadm API server manifest", n.Paths.APIServerManifest())
	case got == want:
		return nil
	case got == n.Paths.localEtcd() || got == n.Paths.LocalURL():
		return fmt.Errorf("this node's API server uses %s: %s", got, done)
	}
	return fmt.Errorf("this node's API server uses %s, neither its local etcd (%s) nor its local store member (%s); fix its manifest first", got, n.Paths.localEtcd(), n.Paths.LocalURL())
}

// stopAPIServerTo stops the local API server, its manifest saved at path.
func (n *Node) stopAPIServerTo(path string) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		port := "6443"
		if m, err := os.ReadFile(n.Paths.APIServerManifest()); err == nil {
			port = storemove.APIServerPort(m)
		} else if m, err := os.ReadFile(path); err == nil {
			port = storemove.APIServerPort(m)
		}
		return n.Paths.StopAPIServer(ctx, path, port)
	}
}

// startSaved puts the manifest saved at path back and waits for the API server.
func (n *Node) startSaved(path string) func(context.Context) error {
	return func(ctx context.Context) error {
		m, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil // never stopped
		}
		if err != nil {
			return err
		}
		return n.startManifest(ctx, m)
	}
}

// startOn starts the API server with the manifest saved at path, its
// --etcd-servers set to endpoint().
func (n *Node) startOn(path string, endpoint func() string) func(context.Context) error {
	return func(ctx context.Context) error {
		m, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read the saved API server manifest: %w", err)
		}
		next, err := staticpod.SetFlag(m, "etcd-servers", endpoint())
		if err != nil {
			return err
		}
		return n.startManifest(ctx, next)
	}
}

func (n *Node) startManifest(ctx context.Context, m []byte) error {
	t0 := time.Now()
	if err := n.Paths.StartAPIServer(ctx, m, n.ReadyTimeout); err != nil {
		return err
	}
	v, _ := staticpod.Flag(m, "etcd-servers")
	fmt.Fprintf(n.Out, "  this node's API server is ready on %s (%v after its manifest was written)\n", v, time.Since(t0).Round(time.Millisecond))
	return nil
}
