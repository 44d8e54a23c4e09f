package storemove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mirror/client"
)

// The undo's own files, under <state>/undo: the store's snapshot and its
// revision, etcd's manifest while etcd is stopped, where etcd's previous
// data dir was set aside, and the etcdutl the undo runs.
func (p Paths) undoDir() string            { return filepath.Join(p.StateDir, "undo") }
func (p Paths) undoSnapshot() string       { return filepath.Join(p.undoDir(), "store.db") }
func (p Paths) undoSnapshotRecord() string { return filepath.Join(p.undoDir(), "snapshot.json") }
func (p Paths) savedEtcdManifest() string  { return filepath.Join(p.undoDir(), "etcd.yaml") }
func (p Paths) undoAsideFile() string      { return filepath.Join(p.undoDir(), "aside.path") }
func (p Paths) undoEtcdutl() string        { return filepath.Join(p.undoDir(), "etcdutl") }
func (p Paths) etcdManifest() string       { return filepath.Join(p.Manifests, "etcd.yaml") }

// procRoot is where the undo looks for the running etcd (RunningEtcdutl).
var procRoot = "/proc"

// preflightUndo checks, changing nothing, what the undo needs besides the
// saved manifest: etcd's manifest in place (etcd runs as kubeadm runs it),
// the store the owner of its data (no replay, no mirror left from an
// earlier run), and an etcdutl of the cluster's etcd version: --etcdutl,
// or the one in the running etcd's image.
func (m *Mover) preflightUndo(ctx context.Context) error {
	manifest, err := os.ReadFile(m.Paths.etcdManifest())
	if err != nil {
		return fmt.Errorf("%s cannot be read (%v): undo restores kubeadm's local etcd and needs it running from its manifest; put it back first", m.Paths.etcdManifest(), unwrap(err))
	}
	member, err := etcdrestore.MemberOf(manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", m.Paths.etcdManifest(), err)
	}
	m.etcdutlFrom = m.Etcdutl
	if m.etcdutlFrom == "" {
		if m.etcdutlFrom, err = etcdrestore.RunningEtcdutl(procRoot, member.DataDir); err != nil {
			return fmt.Errorf("no etcdutl to restore etcd with: %v; nothing was changed. Start etcd (its static pod) so that undo takes etcdutl from its image, or pass --etcdutl with etcd's etcdutl of the cluster's etcd version", err)
		}
	}
	if err := etcdrestore.CheckEtcdutl(ctx, m.etcdutlFrom, manifest); err != nil {
		return err
	}
	return m.checkStoreOwns(ctx)
}

// checkStoreOwns refuses a store that is not the owner of its data: one
// that replays onto etcd or mirrors it is in an undo's middle that no
// journal records.
func (m *Mover) checkStoreOwns(ctx context.Context) error {
	st, err := m.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.Owner || st.Hold != nil {
		return fmt.Errorf("the store is in mode %s (%v), not the owner of its data: an undo that no journal records left it there; check `quantykube store mirror status` and stop it (`quantykube store mirror replay-to --stop`, or `cutover`) first", st.Mode, st.Peer)
	}
	return nil
}

// admin opens the store's mirror admin client with kube-apiserver's etcd
// client certificate.
func (m *Mover) admin() (*client.Client, error) {
	return client.Dial(StoreURL, client.Files{CAFile: m.Paths.EtcdCA(), CertFile: m.Paths.ClientCert(), KeyFile: m.Paths.ClientKey()})
}

// mirrorStatus is the store's mirror status.
func (m *Mover) mirrorStatus(ctx context.Context) (*api.Status, error) {
	a, err := m.admin()
	if err != nil {
		return nil, err
	}
	defer a.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := a.Status(cctx)
	if err != nil {
		return nil, fmt.Errorf("the store's mirror status at %s: %w (is the %s unit running?)", StoreURL, err, UnitName)
	}
	return st, nil
}

// snapshotRecord is what snapshot-store recorded.
type snapshotRecord struct {
	Snapshot string `json:"snapshot"`
	Revision int64  `json:"revision"`
}

// snapshotStoreDo copies etcdutl under the state dir (etcd's image goes
// away with etcd at stop-etcd), saves the store's etcd-format snapshot and
// records its revision S0. An earlier undo's record of where it set etcd's
// data dir aside is dropped first: restore-etcd must set the current one
// aside, not take that one for it.
func (m *Mover) snapshotStoreDo(ctx context.Context) error {
	if err := m.forgetAside(); err != nil {
		return err
	}
	if err := etcdrestore.CopyBinary(m.etcdutlFrom, m.Paths.undoEtcdutl()); err != nil {
		return fmt.Errorf("copy etcdutl under the state dir: %w", err)
	}
	path, size, err := m.Paths.SaveSnapshot(ctx, StoreURL, "store-for-etcd")
	if err != nil {
		return err
	}
	rev, err := etcdrestore.SnapshotRevision(ctx, m.Paths.undoEtcdutl(), path)
	if err != nil {
		return err
	}
	if err := os.Rename(path, m.Paths.undoSnapshot()); err != nil {
		return fmt.Errorf("move the store's snapshot into place: %w", err)
	}
	b, _ := json.Marshal(snapshotRecord{Snapshot: m.Paths.undoSnapshot(), Revision: rev})
	if err := staticpod.WriteAtomic(m.Paths.undoSnapshotRecord(), b, 0o600); err != nil {
		return err
	}
	m.snapRev = rev
	fmt.Fprintf(m.Out, "  the store saved to %s at revision %d (%d MiB)\n", m.Paths.undoSnapshot(), rev, size>>20)
	return nil
}

// forgetAside drops a finished undo's record of where etcd's data dir was
// set aside (the dir itself stays).
func (m *Mover) forgetAside() error {
	if err := os.Remove(m.Paths.undoAsideFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("drop the last undo's %s: %w", m.Paths.undoAsideFile(), err)
	}
	return nil
}

func (m *Mover) readSnapshotRecord() (snapshotRecord, error) {
	var r snapshotRecord
	b, err := os.ReadFile(m.Paths.undoSnapshotRecord())
	if err != nil {
		return r, fmt.Errorf("read what snapshot-store recorded: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s is damaged: %w", m.Paths.undoSnapshotRecord(), err)
	}
	return r, nil
}

// etcdAddr is etcd's client host:port, as the API server reached it.
func (m *Mover) etcdAddr() string {
	u, err := url.Parse(m.endpoint)
	if err != nil {
		return "127.0.0.1:2379"
	}
	return u.Host
}

func (m *Mover) stopEtcdDo(ctx context.Context) error {
	return etcdrestore.Stop(ctx, m.Paths.Kubelet(), m.Paths.etcdManifest(), m.Paths.savedEtcdManifest(), m.etcdAddr())
}

// startEtcdDo puts etcd's manifest back and waits until etcd answers, so
// that whatever follows (replay-to, or a rollback's API server and a
// fresh undo's preflight) finds it serving.
func (m *Mover) startEtcdDo(ctx context.Context) error {
	if err := etcdrestore.Start(m.Paths.etcdManifest(), m.Paths.savedEtcdManifest()); err != nil {
		return err
	}
	rev, err := m.waitEtcd(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  etcd answers at revision %d\n", rev)
	return nil
}

// etcdStartTimeout bounds the wait for a started etcd to answer (kubelet
// notices the manifest within its 20 s rescan at worst).
const etcdStartTimeout = 2 * time.Minute

// waitEtcd waits until etcd answers and returns its revision.
func (m *Mover) waitEtcd(ctx context.Context) (int64, error) {
	cli, err := m.Paths.Dial(m.endpoint)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	var rev int64
	var last error
	err = wait.PollUntilContextTimeout(ctx, storePoll, etcdStartTimeout, true, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := cli.Get(cctx, "health", clientv3.WithCountOnly())
		if last = err; err != nil {
			return false, nil
		}
		rev = resp.Header.Revision
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return 0, fmt.Errorf("etcd did not answer at %s within %v after its manifest was put back: %v (see the etcd static pod's logs)", m.endpoint, etcdStartTimeout, last)
	}
	return rev, err
}

// etcdRestore is restore-etcd's restore of the one local member from the
// store's snapshot, with the name, data dir, peer URL and token of the
// manifest stop-etcd saved.
func (m *Mover) etcdRestore() (etcdrestore.Restore, error) {
	r := etcdrestore.Restore{Etcdutl: m.Paths.undoEtcdutl(), Snapshot: m.Paths.undoSnapshot(), AsideFile: m.Paths.undoAsideFile()}
	b, err := os.ReadFile(m.Paths.savedEtcdManifest())
	if err != nil {
		return r, fmt.Errorf("read etcd's manifest saved by stop-etcd: %w", err)
	}
	if r.Member, err = etcdrestore.MemberOf(b); err != nil {
		return r, fmt.Errorf("%s: %w", m.Paths.savedEtcdManifest(), err)
	}
	r.InitialCluster = []string{r.Member.Name + "=" + r.Member.PeerURL}
	return r, nil
}

func (m *Mover) restoreEtcdDo(ctx context.Context) error {
	r, err := m.etcdRestore()
	if err != nil {
		return err
	}
	return r.Do(ctx, m.Out)
}

// unrestoreEtcdDo puts etcd's previous data dir back (nothing to do if it
// was never set aside).
func (m *Mover) unrestoreEtcdDo(ctx context.Context) error {
	r, err := m.etcdRestore()
	if errors.Is(err, os.ErrNotExist) {
		return nil // stop-etcd never saved the manifest: nothing was set aside
	}
	if err != nil {
		return err
	}
	return r.Undo()
}
