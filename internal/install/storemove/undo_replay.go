package storemove

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

// replayLevelTimeout bounds the wait for the replay to come close to the
// store's revision; replayCloseLag is how close (the cut-back then holds
// writes only for what is left).
const (
	replayLevelTimeout = 3 * time.Minute
	replayCloseLag     = 100
)

// etcdPeer is the local etcd as the store reaches it: kubeadm's etcd CA
// and the API server's etcd client certificate.
func (m *Mover) etcdPeer() api.Peer {
	return api.Peer{Endpoints: []string{m.endpoint}, CAFile: m.Paths.EtcdCA(), CertFile: m.Paths.ClientCert(), KeyFile: m.Paths.ClientKey()}
}

// replayToDo makes the store replay its revisions after the snapshot's
// onto the restored etcd, then waits until etcd is close to the store's
// revision, while the API server serves the store.
func (m *Mover) replayToDo(ctx context.Context) error {
	rec, err := m.readSnapshotRecord()
	if err != nil {
		return err
	}
	m.snapRev = rec.Revision
	a, err := m.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	if err := etcdrestore.ReplayTo(ctx, a, m.etcdPeer(), rec.Revision); err != nil {
		return err
	}
	return m.waitReplayClose(ctx)
}

// waitReplayClose waits until the store's replay onto etcd is at most
// replayCloseLag revisions behind.
func (m *Mover) waitReplayClose(ctx context.Context) error {
	start := time.Now()
	var last string
	err := wait.PollUntilContextTimeout(ctx, storePoll, replayLevelTimeout, true, func(ctx context.Context) (bool, error) {
		st, err := m.mirrorStatus(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if st.Failed != "" {
			return false, fmt.Errorf("the replay onto etcd failed: %s", st.Failed)
		}
		last = fmt.Sprintf("lag %d (etcd at %d, the store at %d) %s", st.Lag, st.PeerRevision, st.AppliedRevision, st.PeerError)
		return st.PeerRevision > 0 && st.Lag <= replayCloseLag, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the replay onto etcd did not come within %d revisions of the store in %v: %s", replayCloseLag, replayLevelTimeout, last)
	}
	if err == nil {
		fmt.Fprintf(m.Out, "  the store replays onto etcd from revision %d: %s after %v\n", m.snapRev, last, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// replayStopDo makes the store the sole owner again (replay-to's undo; a
// store that does not replay any more is left alone).
func (m *Mover) replayStopDo(ctx context.Context) error {
	a, err := m.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	return etcdrestore.StopReplay(ctx, a)
}

// cutbackDo makes the store a mirror of etcd: writes are held while etcd
// applies the last revisions, then forwarded to etcd, which is the source
// of truth from here on.
func (m *Mover) cutbackDo(ctx context.Context) error {
	a, err := m.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	p, err := etcdrestore.Transition(ctx, a, "cutback", m.HoldTimeout, m.Out, m.Log)
	if p != nil {
		m.pause = p
	}
	if err != nil || p == nil {
		return err
	}
	return m.verifyBack(ctx, p.Revision)
}

// verifyBack compares etcd and the store at rev, the cut-back's revision
// (the store's last own one, which etcd holds now), with install's verify
// digest: every key with its value, create and mod revision, version and
// lease, in key order, on both sides. The API server still serves the
// store (which forwards to etcd), so this costs no downtime; a difference
// fails the cut-back, whose undo makes the store the owner again.
// A revision compacted meanwhile (the API server compacts every five
// minutes, far behind) is logged, not failed: the replay compared every
// revision it applied.
func (m *Mover) verifyBack(ctx context.Context, rev int64) error {
	digest := func(endpoint string) (Digest, error) {
		cli, err := m.Paths.Dial(endpoint)
		if err != nil {
			return Digest{}, err
		}
		defer cli.Close()
		return EtcdDigest(ctx, cli, rev, 0)
	}
	start := time.Now()
	want, err := digest(StoreURL)
	if err == nil {
		var got Digest
		if got, err = digest(m.endpoint); err == nil && got != want {
			return fmt.Errorf("etcd differs from the store at revision %d after the replay: etcd %v, the store %v", rev, got, want)
		}
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		m.Log.Warn("revision compacted before verify could read it; not compared", "revision", rev, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("compare etcd and the store at revision %d: %w", rev, err)
	}
	fmt.Fprintf(m.Out, "  etcd and the store agree: %v (compared in %v)\n", want, time.Since(start).Round(time.Millisecond))
	return nil
}

// cutbackUndo makes a store that mirrors etcd its owner again with a
// cut-over (writes held until the store has applied etcd's last revision;
// the API server on the store is etcd's only writer). A store that never
// cut back (still replaying) is left to replay-to's undo.
func (m *Mover) cutbackUndo(ctx context.Context) error {
	var st *api.Status
	err := wait.PollUntilContextTimeout(ctx, storePoll, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if st, err = m.mirrorStatus(ctx); err != nil {
			return false, err
		}
		return st.Hold == nil, nil // a cut-back in progress ends within its hold timeout
	})
	if err != nil {
		return fmt.Errorf("wait for the store's cut-back to end: %w", err)
	}
	if st.Mode != api.Mirror {
		return nil
	}
	a, err := m.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	_, err = etcdrestore.Transition(ctx, a, "cutover", m.HoldTimeout, m.Out, m.Log)
	return err
}
