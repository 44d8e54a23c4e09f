package etcdrestore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// StopTimeout bounds the wait for a stopped etcd member to be gone;
// stopGrace is how long it may take to exit on kubelet's SIGTERM (it
// syncs its WAL and closes in well under a second) before its container is
// stopped through the CRI.
const (
	StopTimeout = 90 * time.Second
	stopGrace   = 10 * time.Second
)

// poll is how often a wait here looks again.
const poll = 200 * time.Millisecond

// Stop stops the etcd member kubelet runs from manifest: the manifest is
// saved at saved, then removed, and Stop waits until nothing listens on
// addr (the member's client host:port), no etcd container runs, and kubelet
// has finished the pod (staticpod.Kubelet.WaitStopped), so that Start's
// manifest — the same one, with the same pod UID — makes kubelet start etcd
// at once rather than after its crash-loop back-off. A manifest already
// gone was stopped by an earlier run: the saved copy must then exist.
// Idempotent.
func Stop(ctx context.Context, k staticpod.Kubelet, manifest, saved, addr string) error {
	cur, err := os.ReadFile(manifest)
	switch {
	case err == nil:
		if err := os.MkdirAll(filepath.Dir(saved), 0o700); err != nil {
			return err
		}
		if err := staticpod.WriteAtomic(saved, cur, 0o600); err != nil {
			return err
		}
		if err := os.Remove(manifest); err != nil {
			return fmt.Errorf("move etcd's manifest out: %w", err)
		}
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(saved); err != nil {
			return fmt.Errorf("etcd's manifest is neither in %s nor saved at %s", filepath.Dir(manifest), saved)
		}
	default:
		return err
	}
	return k.WaitStopped(ctx, staticpod.Stopped{
		Component: "etcd",
		Up:        func(context.Context) bool { return Listening(addr) },
		Poll:      poll,
		Grace:     stopGrace,
		Timeout:   StopTimeout,
	})
}

// Start puts etcd's saved manifest back at manifest (kubelet starts the
// member). A manifest still in place was never moved out (Stop saves it
// before it removes it): it is left alone, as the saved copy may be an
// earlier undo's, older than the one kubeadm keeps now.
func Start(manifest, saved string) error {
	if _, err := os.Stat(manifest); err == nil {
		return nil
	}
	b, err := os.ReadFile(saved)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("etcd's manifest is neither in %s nor saved at %s", filepath.Dir(manifest), saved)
	}
	if err != nil {
		return err
	}
	return staticpod.WriteAtomic(manifest, b, 0o600)
}

// Listening reports whether something accepts TCP connections on addr.
func Listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
