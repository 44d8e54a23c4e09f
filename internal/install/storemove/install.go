package storemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/install/systemd"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// UnitName is the store's systemd unit.
const UnitName = "quantykube-store"

// Mover runs install store and undo store on this node.
type Mover struct {
	Paths Paths
	Log   *slog.Logger
	Out   io.Writer
	// NodeName names the store's member (default: the host name).
	NodeName string
	// ReadyTimeout bounds the wait for the API server after a switch.
	ReadyTimeout time.Duration
	// Faults injects failures for tests (install.FaultsFromEnv); nil in production.
	Faults install.Faults
	// Etcdutl is etcd's etcdutl, of the cluster's etcd version, for undo
	// (default: the one in the running etcd's image, found through /proc).
	Etcdutl string
	// HoldTimeout bounds undo's cut-back write pause (default 5 s).
	HoldTimeout time.Duration

	// state carried between the steps of one run
	manifest   []byte // the original (etcd) manifest
	endpoint   string // etcd's URL
	port       string // the API server's port
	etcd       *clientv3.Client
	store      *mvcc.Store
	copier     *Copier
	followStop context.CancelFunc
	followDone chan error
	finalRev   int64
	stopped    time.Time
	copyStats  CopyStats
	// undo: where etcdutl is taken from (preflight), the revision of the
	// store's snapshot etcd is restored from, the cut-back's write pause
	etcdutlFrom string
	snapRev     int64
	pause       *api.Pause
	Downtime    time.Duration
}

// defaults fills what the caller left unset.
func (m *Mover) defaults() {
	if m.ReadyTimeout == 0 {
		m.ReadyTimeout = 3 * time.Minute
	}
	if m.HoldTimeout == 0 {
		m.HoldTimeout = 5 * time.Second
	}
}

// subject wires the store into the shared install/undo flow.
func (m *Mover) subject() *install.Subject {
	j, _ := install.OpenJournal(m.Paths.journal())
	return &install.Subject{
		Name: "store", Journal: j, LockPath: m.Paths.lockFile(), Log: m.Log, Out: m.Out, Faults: m.Faults,
		Plan: func(op string) *install.Plan {
			switch op {
			case install.OpUndo:
				return m.undoPlan()
			case install.OpReattach:
				return m.reattachPlan()
			case install.OpRelease:
				return m.releasePlan()
			}
			return m.installPlan()
		},
		Preflight: m.preflight,
		Load:      m.load,
		Stands:    m.stands,
	}
}

// load reads what the steps of an interrupted run need: the original
// manifest saved by install.
func (m *Mover) load() error {
	m.manifest, _ = os.ReadFile(m.Paths.savedManifest())
	m.port = APIServerPort(m.manifest)
	m.endpoint, _ = staticpod.Flag(m.manifest, "etcd-servers")
	if rec, err := m.readSnapshotRecord(); err == nil {
		m.snapRev = rec.Revision // an undo's, for its closing line
	}
	return nil
}

func (m *Mover) preflight(ctx context.Context, op string) error {
	switch op {
	case install.OpReattach, install.OpRelease:
		return m.preflightDiverged(ctx, op)
	case install.OpUndo:
		if err := m.load(); err != nil {
			return err
		}
		if len(m.manifest) == 0 {
			return fmt.Errorf("the original API server manifest %s is missing; cannot go back to etcd safely", m.Paths.savedManifest())
		}
		return m.preflightUndo(ctx)
	}
	if err := m.refuseNewerData(ctx); err != nil {
		return err
	}
	var err error
	if m.manifest, m.endpoint, err = m.Paths.preflightInstall(ctx); err != nil {
		return err
	}
	m.port = APIServerPort(m.manifest)
	if err := m.Paths.checkClusterConfig(ctx); err != nil {
		return err
	}
	return systemd.Available(ctx)
}

// Install moves the API server from etcd onto the store. With dryRun it
// prints the preflight verdict and the plan and changes nothing; a failed
// preflight is its error.
func (m *Mover) Install(ctx context.Context, dryRun bool) error {
	m.defaults()
	if dryRun {
		return m.subject().DryRun(ctx, install.OpInstall)
	}
	defer m.closeAll()
	ran, err := m.subject().Execute(ctx, install.OpInstall)
	if err != nil || !ran {
		return err
	}
	fmt.Fprintf(m.Out, "installed: %d keys copied at %.0f keys/s; API-server downtime %v; revision kept at %d\n",
		m.copyStats.Keys, m.copyStats.Rate(), m.Downtime.Round(time.Millisecond), m.finalRev)
	return nil
}

func (m *Mover) closeAll() {
	m.stopFollow()
	if m.store != nil {
		m.store.Close()
		m.store = nil
	}
	if m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

// installPlan keeps the API server's downtime (stop-apiserver to
// apiserver-ready) to the API server's own restart: the full comparison runs
// before it stops, and its new manifest is written right after it stopped,
// so kubelet starts it while the last changes are applied and compared; it
// can serve only once start-store (the commit step) has the store
// listening. Under the control plane's leader-election renew deadline (10
// s), kube-controller-manager and kube-scheduler keep their leases and the
// cluster acts on changes at once after the move.
func (m *Mover) installPlan() *install.Plan {
	return &install.Plan{Op: "install", Steps: []install.Step{
		{Name: "copy", Impact: "none: etcd is read at one revision, page by page, while the API server serves; changes after it are followed",
			Do: m.copyDo, Undo: m.copyUndo},
		{Name: "verify", Impact: "none: while the API server serves, key count and hash compared on both sides at one revision the copy has reached",
			Do: m.verifyDo},
		{Name: "stop-apiserver", Impact: "the API server stops: requests fail until apiserver-ready; running pods are not affected",
			Do: m.stopDo, Undo: m.restoreEtcdManifest},
		{Name: "switch-apiserver", Impact: "API server down: its manifest names the store (only --etcd-servers changes); kubelet starts it, it waits for the store",
			Do: m.switchDo, Undo: m.restoreEtcdManifest},
		{Name: "catch-up", Impact: "API server down: the changes made since the copy are applied with their revisions",
			Do: m.catchUpDo},
		{Name: "verify-changes", Impact: "API server down: every key changed since verify compared on both sides",
			Do: m.verifyChangesDo},
		{Name: "start-store", Commit: true, Impact: "the quantykube-store unit starts on 127.0.0.1:2479; the API server serves from it",
			Do: m.startStoreDo, Undo: m.removeUnit},
		{Name: "apiserver-ready", Impact: "the API server answers again, on the store",
			Do: m.apiserverReadyDo},
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names the store as external etcd, so kubeadm upgrade keeps the API server on it",
			Do: m.recordStoreDo},
		m.leadersStep(),
	}}
}

func (m *Mover) copyDo(ctx context.Context) error {
	if err := os.RemoveAll(m.Paths.DataDir); err != nil {
		return fmt.Errorf("clear %s: %w", m.Paths.DataDir, err)
	}
	var err error
	if m.etcd, err = m.Paths.Dial(m.endpoint); err != nil {
		return err
	}
	// Lease expiry held: until the commit step the leases are etcd's, and
	// etcd's expiries arrive as its events; one expired here too would be
	// a revision etcd never made (catch-up then waits for a revision the
	// copy can never reach).
	if m.store, err = mvcc.Open(m.Paths.DataDir, mvcc.Options{Logger: m.Log, HoldLeases: true}); err != nil {
		return err
	}
	// The unit is written now, while nothing is down, so that start-store
	// only starts it; copyUndo removes it again.
	if err := m.writeStoreUnit(ctx); err != nil {
		return err
	}
	m.copier = &Copier{Etcd: m.etcd, Store: m.store, Log: m.Log}
	if m.copyStats, err = m.copier.Bulk(ctx); err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  copied %d keys and %d leases at revision %d in %v (%.0f keys/s)\n",
		m.copyStats.Keys, m.copyStats.Leases, m.copyStats.Revision, m.copyStats.Duration.Round(time.Millisecond), m.copyStats.Rate())
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.followStop, m.followDone = cancel, make(chan error, 1)
	go func() { m.followDone <- m.copier.Follow(fctx) }()
	return nil
}

// copyUndo throws the copy and the unit away: etcd stays the source of truth.
func (m *Mover) copyUndo(ctx context.Context) error {
	m.closeAll()
	if err := m.removeUnit(ctx); err != nil {
		return err
	}
	if err := os.RemoveAll(m.Paths.DataDir); err != nil {
		return fmt.Errorf("remove %s: %w", m.Paths.DataDir, err)
	}
	return nil
}

func (m *Mover) stopDo(ctx context.Context) error {
	m.stopped = time.Now()
	return m.Paths.StopAPIServer(ctx, m.Paths.savedManifest(), m.port)
}

// restoreEtcdManifest puts the original manifest back byte for byte and
// waits for the API server on etcd. A manifest still in place that does not
// name the store was never moved out (stop-apiserver saves it before it
// removes it, and only switch-apiserver points it at the store): it is
// left alone. The saved copy may then be an earlier move's, older than the
// manifest kubeadm keeps now (kill -9 at the start of stop-apiserver on a
// node moved before), or missing (the same on a first move).
func (m *Mover) restoreEtcdManifest(ctx context.Context) error {
	if present, onStore := m.Paths.manifestInPlace(); present && !onStore {
		return nil
	}
	orig, err := os.ReadFile(m.Paths.savedManifest())
	if err != nil {
		return fmt.Errorf("read the saved manifest: %w", err)
	}
	return m.Paths.StartAPIServer(ctx, orig, 3*time.Minute)
}

func (m *Mover) catchUpDo(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rev, err := m.copier.CatchUp(cctx)
	if err != nil {
		return err
	}
	m.followStop()
	if err := <-m.followDone; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("follow etcd: %w", err)
	}
	m.followStop = nil
	m.finalRev = rev
	if err := m.Paths.writeHandover(handover{Etcd: m.endpoint, MovedAt: rev}); err != nil {
		return err
	}
	fmt.Fprintf(m.Out, "  applied %d revisions made during the copy; etcd's final revision is %d\n", rev-m.copyStats.Revision, rev)
	return nil
}

// verifyAttempts bounds how often verify picks a newer revision when etcd
// compacted the one it chose (the API server compacts every five minutes).
const verifyAttempts = 3

// verifyDo compares both sides at a revision the copy has reached, while
// the API server serves; the keys the copy changes after it are compared by
// verify-changes.
func (m *Mover) verifyDo(ctx context.Context) error {
	var err error
	for range verifyAttempts {
		rev := m.copier.MarkChanges()
		var want, got Digest
		if want, err = EtcdDigest(ctx, m.etcd, rev, 0); errors.Is(err, rpctypes.ErrCompacted) {
			continue
		} else if err != nil {
			return err
		}
		if got, err = StoreDigest(ctx, m.store, rev); err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("the copy differs from etcd: store %v, etcd %v", got, want)
		}
		fmt.Fprintf(m.Out, "  etcd and the store agree: %v\n", got)
		return nil
	}
	return fmt.Errorf("etcd compacted past every revision verify chose: %w", err)
}

// verifyChangesDo compares, at the final revision, every key the copy
// changed since verify.
func (m *Mover) verifyChangesDo(ctx context.Context) error {
	keys := m.copier.Changes()
	for _, k := range keys {
		want, err := m.etcd.Get(ctx, k, clientv3.WithRev(m.finalRev))
		if err != nil {
			return fmt.Errorf("read %q from etcd at revision %d: %w", k, m.finalRev, err)
		}
		got, err := m.store.Range(ctx, &etcdserverpb.RangeRequest{Key: []byte(k), Revision: m.finalRev})
		if err != nil {
			return fmt.Errorf("read %q from the store at revision %d: %w", k, m.finalRev, err)
		}
		if !sameKVs(want.Kvs, got.Kvs) {
			return fmt.Errorf("the copy differs from etcd at %q (revision %d): store %v, etcd %v", k, m.finalRev, got.Kvs, want.Kvs)
		}
	}
	fmt.Fprintf(m.Out, "  the %d keys changed since verify agree at revision %d\n", len(keys), m.finalRev)
	return nil
}

// sameKVs compares key-values field by field as HashKV digests them.
func sameKVs(a, b []*mvccpb.KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(mvcc.HashKeyValue(nil, a[i]), mvcc.HashKeyValue(nil, b[i])) {
			return false
		}
	}
	return true
}

func (m *Mover) storeUnit() systemd.Unit {
	name := m.NodeName
	if name == "" {
		name, _ = os.Hostname()
	}
	p := m.Paths
	return systemd.Unit{Name: UnitName, Content: fmt.Sprintf(`[Unit]
Description=QuantyKube store: the etcd v3 API kube-apiserver runs on
Documentation=https://github.com/quantyroot/quantykube
After=network.target

[Service]
ExecStart=%s store --name %s --data-dir %s --listen-client-urls %s --advertise-client-urls %s --listen-metrics-urls %s --cert-file %s --key-file %s --trusted-ca-file %s --client-cert-auth
Restart=always
RestartSec=1s
TimeoutStopSec=10s

[Install]
WantedBy=multi-user.target
`, p.Binary, name, p.DataDir, StoreURL, StoreURL, StoreMetricsURL, p.ServerCert(), p.ServerKey(), p.EtcdCA())}
}

// startStoreDo starts the unit copyDo wrote: inside the API server's
// downtime only a start, no reload (the unit is enabled once the API
// server serves, by apiserverReadyDo).
func (m *Mover) startStoreDo(ctx context.Context) error {
	// The unit opens the data dir: release it here first.
	m.closeAll()
	if err := m.writeStoreUnit(ctx); err != nil { // a rerun after a crash: cheap when written
		return err
	}
	if err := systemd.Start(ctx, UnitName); err != nil {
		return err
	}
	return m.waitStore(ctx)
}

// writeStoreUnit puts the store's binary and unit on the node, neither
// enabled nor started; idempotent, and cheap once done.
func (m *Mover) writeStoreUnit(ctx context.Context) error {
	if err := InstallBinary(m.Paths.Binary); err != nil {
		return err
	}
	u := m.storeUnit()
	if cur, err := os.ReadFile(u.Path()); err == nil && string(cur) == u.Content {
		return nil
	}
	return systemd.Write(ctx, u)
}

// waitStore waits until the store's unit answers (at m.finalRev when set).
// A started store unit answers within storeAnswerTimeout (it opens its data
// dir and listens); polled every storePoll.
const (
	storeAnswerTimeout = 30 * time.Second
	storePoll          = 200 * time.Millisecond
)

func (m *Mover) waitStore(ctx context.Context) error {
	cli, err := m.Paths.Dial(StoreURL)
	if err != nil {
		return err
	}
	defer cli.Close()
	var last error
	err = wait.PollUntilContextTimeout(ctx, storePoll, storeAnswerTimeout, true, func(ctx context.Context) (bool, error) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := cli.Get(sctx, "health")
		if last = err; err != nil {
			return false, nil
		}
		// The unit owns the leases from its start: one that ran out during
		// the downtime is revoked at once, a revision of its own past
		// finalRev. Below it, the data is not what was copied.
		if m.finalRev != 0 && resp.Header.Revision < m.finalRev {
			return false, fmt.Errorf("the store started at revision %d, want %d", resp.Header.Revision, m.finalRev)
		}
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("the store unit did not answer on %s within %v: %w (see journalctl -u %s)", StoreURL, storeAnswerTimeout, last, UnitName)
	}
	return err
}

func (m *Mover) removeUnit(ctx context.Context) error { return systemd.Remove(ctx, UnitName) }

// switchDo points the API server's manifest at the store; kubelet starts
// it, and it waits for the store (start-store) before it can serve.
func (m *Mover) switchDo(ctx context.Context) error {
	orig, err := os.ReadFile(m.Paths.savedManifest())
	if err != nil {
		return fmt.Errorf("read the saved manifest: %w", err)
	}
	next, err := staticpod.SetFlag(orig, "etcd-servers", StoreURL)
	if err != nil {
		return err
	}
	if staticpod.Equal(m.Paths.APIServerManifest(), next) {
		return nil
	}
	return staticpod.WriteAtomic(m.Paths.APIServerManifest(), next, 0o600)
}

// apiserverReadyDo waits until the API server answers on the store, then
// enables the store's unit (it starts at boot from here on).
func (m *Mover) apiserverReadyDo(ctx context.Context) error {
	if err := WaitReady(ctx, m.port, m.ReadyTimeout); err != nil {
		return err
	}
	if !m.stopped.IsZero() {
		m.Downtime = time.Since(m.stopped)
		fmt.Fprintf(m.Out, "  API-server downtime: %v\n", m.Downtime.Round(time.Millisecond))
	}
	return systemd.Enable(ctx, UnitName)
}

// InstallBinary copies the running executable to path (atomically) unless
// it is already that file.
func InstallBinary(path string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find my own binary: %w", err)
	}
	if self == path {
		return nil
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return fmt.Errorf("read my own binary: %w", err)
	}
	if staticpod.Equal(path, data) {
		return nil
	}
	return staticpod.WriteAtomic(path, data, 0o755)
}
