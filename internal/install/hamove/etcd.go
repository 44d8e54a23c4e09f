package hamove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/staticpod"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

func (n *Node) stopEtcdPlan() *install.Plan {
	return &install.Plan{Op: StepStopEtcd, Steps: []install.Step{
		{Name: "save-etcd", Impact: "none: a snapshot of the local etcd member is saved under the state dir (no API server uses etcd since the cut-over)",
			Do: n.saveEtcdDo},
		{Name: "stop-etcd", Impact: "none for clients: the local etcd member stops (its manifest kept under the state dir); no API server uses it",
			Do: n.stopEtcdDo, Undo: n.startEtcdDo},
	}}
}

func (n *Node) stopEtcdPreflight(ctx context.Context) error {
	if err := n.apiserverOn(n.Paths.LocalURL(), "it was never moved; nothing to undo on this node"); err != nil {
		return err
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode == api.Mirror {
		return fmt.Errorf("the store still mirrors etcd (no cut-over): undo goes straight to `quantykube undo store --ha %s` on each node", StepSwitchBack)
	}
	if _, err := os.Stat(n.Paths.etcdManifest()); err != nil {
		return fmt.Errorf("%s is missing: etcd is not running on this node as kubeadm runs it; put its manifest back first", n.Paths.etcdManifest())
	}
	return nil
}

func (n *Node) saveEtcdDo(ctx context.Context) error {
	if _, err := n.etcdMembers(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path, size, err := n.Paths.SaveSnapshot(sctx, n.Paths.localEtcd(), "etcd-before-undo")
	if err != nil {
		// Without quorum (its peers stopped) a member may not answer; its
		// data dir is set aside whole by restore-etcd, never deleted.
		fmt.Fprintf(n.Out, "  the local etcd member could not be saved to a snapshot (%v); its data dir is kept whole by restore-etcd\n", err)
		return nil
	}
	fmt.Fprintf(n.Out, "  etcd saved to %s (%d KiB)\n", path, size>>10)
	return nil
}

// etcdStopTimeout bounds the wait for a stopped etcd member's port to close.
const etcdStopTimeout = 90 * time.Second

func (n *Node) stopEtcdDo(ctx context.Context) error {
	cur, err := os.ReadFile(n.Paths.etcdManifest())
	switch {
	case err == nil:
		if err := os.MkdirAll(filepath.Dir(n.Paths.savedEtcdManifest()), 0o700); err != nil {
			return err
		}
		if err := staticpod.WriteAtomic(n.Paths.savedEtcdManifest(), cur, 0o600); err != nil {
			return err
		}
		if err := os.Remove(n.Paths.etcdManifest()); err != nil {
			return fmt.Errorf("move etcd's manifest out: %w", err)
		}
	case errors.Is(err, os.ErrNotExist):
		if _, err := os.Stat(n.Paths.savedEtcdManifest()); err != nil {
			return fmt.Errorf("etcd's manifest is neither in %s nor saved at %s", n.Paths.Manifests, n.Paths.savedEtcdManifest())
		}
	default:
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, poll, etcdStopTimeout, true, func(ctx context.Context) (bool, error) {
		return !listening(n.Paths.localEtcdAddr()), nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("etcd still listens on %s %v after its manifest was removed", n.Paths.localEtcdAddr(), etcdStopTimeout)
	}
	return err
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// startEtcdDo puts etcd's saved manifest back (kubelet starts the member).
// A manifest still in place was never moved out (stop-etcd saves it before
// it removes it): it is left alone, as the saved copy may be an earlier
// undo's, older than the one kubeadm keeps now.
func (n *Node) startEtcdDo(ctx context.Context) error {
	if _, err := os.Stat(n.Paths.etcdManifest()); err == nil {
		return nil
	}
	saved, err := os.ReadFile(n.Paths.savedEtcdManifest())
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("etcd's manifest is neither in %s nor saved at %s", n.Paths.Manifests, n.Paths.savedEtcdManifest())
	}
	if err != nil {
		return err
	}
	return staticpod.WriteAtomic(n.Paths.etcdManifest(), saved, 0o600)
}

// replayedSnapshot is the store snapshot replay-to saves; restore-etcd on
// every node reads it at the same path (the other nodes fetch it there).
func (p Paths) replayedSnapshot() string { return filepath.Join(p.stepDir(StepReplayTo), "store.db") }

func (n *Node) replayToPlan() *install.Plan {
	return &install.Plan{Op: StepReplayTo, Steps: []install.Step{
		{Name: "snapshot-store", Impact: "none: a snapshot of the store (etcd's format) is saved; etcd's members are restored from it",
			Do: n.snapshotStoreDo},
		{Name: "serve-snapshot", Impact: "none: the snapshot is served (HTTPS, etcd's peer certificates both ways) on this node's address, port " + n.Paths.SnapshotPort + ", to the other nodes' restore-etcd, until cutback",
			Do: n.serveSnapshotDo, Undo: n.stopServingDo},
		{Name: "replay-to", Impact: "none: the store records that it replays its changes after the snapshot onto etcd (it waits until etcd's members are restored); compaction waits meanwhile",
			Do: n.replayToDo, Undo: n.replayStopDo},
	}}
}

func (n *Node) replayToPreflight(ctx context.Context) error {
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.Owner {
		return fmt.Errorf("the store is in mode %s, not the owner: replay-to comes after the cut-over and stop-etcd", st.Mode)
	}
	if err := n.checkEtcdutl(ctx); err != nil {
		return err
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		u, _ := url.Parse(m.ClientURL)
		if listening(u.Host) {
			return fmt.Errorf("etcd member %s still runs (%s): run `quantykube undo store --ha %s` on its node first", m.Name, m.ClientURL, StepStopEtcd)
		}
	}
	return nil
}

// checkEtcdutl refuses an etcdutl that is missing, or of another etcd
// minor version than the cluster's etcd (its image's tag, in the manifest
// stop-etcd saved): a snapshot restored by another minor version's etcdutl
// may not open in the cluster's etcd.
func (n *Node) checkEtcdutl(ctx context.Context) error {
	if _, err := exec.LookPath(n.Paths.Etcdutl); err != nil {
		return fmt.Errorf("etcdutl not found at %s (%v): copy etcd's etcdutl, of the cluster's etcd version, there or pass --etcdutl (the operator's image carries one)", n.Paths.Etcdutl, err)
	}
	m, err := os.ReadFile(n.Paths.savedEtcdManifest())
	if err != nil {
		return nil // stop-etcd's own preflight asks for it
	}
	cluster, ok := imageMinor(m)
	if !ok {
		return nil // not a version tag: nothing to compare
	}
	out, err := exec.CommandContext(ctx, n.Paths.Etcdutl, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", n.Paths.Etcdutl, err)
	}
	have, ok := etcdutlMinor(out)
	if ok && have != cluster {
		return fmt.Errorf("%s is etcd %s's etcdutl, the cluster runs etcd %s: pass --etcdutl with etcd %s's etcdutl", n.Paths.Etcdutl, have, cluster, cluster)
	}
	return nil
}

var (
	imageTagRE = regexp.MustCompile(`(?m)^[\s-]*image:\s*"?[^"\s]*:v?(\d+\.\d+)\.\d+`)
	etcdutlRE  = regexp.MustCompile(`etcdutl version:\s*v?(\d+\.\d+)\.\d+`)
)

// imageMinor is MAJOR.MINOR of the etcd image a static pod manifest runs
// (registry.k8s.io/etcd:3.6.5-0 → 3.6).
func imageMinor(manifest []byte) (string, bool) {
	m := imageTagRE.FindSubmatch(manifest)
	if m == nil {
		return "", false
	}
	return string(m[1]), true
}

// etcdutlMinor is MAJOR.MINOR of `etcdutl version`'s output.
func etcdutlMinor(out []byte) (string, bool) {
	m := etcdutlRE.FindSubmatch(out)
	if m == nil {
		return "", false
	}
	return string(m[1]), true
}

// replayRecord is what replay-to recorded: the snapshot and its revision.
type replayRecord struct {
	Snapshot string `json:"snapshot"`
	Revision int64  `json:"revision"`
}

func (p Paths) replayRecordFile() string {
	return filepath.Join(p.stepDir(StepReplayTo), "snapshot.json")
}

func (n *Node) snapshotStoreDo(ctx context.Context) error {
	path, _, err := n.Paths.SaveSnapshot(ctx, n.Paths.LocalURL(), "store-for-etcd")
	if err != nil {
		return err
	}
	rev, err := n.snapshotRevision(ctx, path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(n.Paths.stepDir(StepReplayTo), 0o700); err != nil {
		return err
	}
	if err := os.Rename(path, n.Paths.replayedSnapshot()); err != nil {
		return fmt.Errorf("move the snapshot into place: %w", err)
	}
	b, _ := json.Marshal(replayRecord{Snapshot: n.Paths.replayedSnapshot(), Revision: rev})
	fmt.Fprintf(n.Out, "  the store saved to %s at revision %d\n", n.Paths.replayedSnapshot(), rev)
	return staticpod.WriteAtomic(n.Paths.replayRecordFile(), b, 0o600)
}

// snapshotRevision is the revision of a snapshot file (etcdutl's status).
func (n *Node) snapshotRevision(ctx context.Context, path string) (int64, error) {
	out, err := exec.CommandContext(ctx, n.Paths.Etcdutl, "snapshot", "status", path, "-w", "json").Output()
	if err != nil {
		return 0, fmt.Errorf("etcdutl snapshot status %s: %w", path, err)
	}
	var st struct {
		Revision int64 `json:"revision"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Revision == 0 {
		return 0, fmt.Errorf("etcdutl snapshot status %s printed %q (%v)", path, out, err)
	}
	return st.Revision, nil
}

func (n *Node) readReplayRecord() (replayRecord, error) {
	var r replayRecord
	b, err := os.ReadFile(n.Paths.replayRecordFile())
	if err != nil {
		return r, fmt.Errorf("read what snapshot-store recorded: %w", err)
	}
	return r, json.Unmarshal(b, &r)
}

func (n *Node) replayToDo(ctx context.Context) error {
	rec, err := n.readReplayRecord()
	if err != nil {
		return err
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	a, err := n.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := a.ReplayTo(cctx, api.ReplayToRequest{Target: n.etcdPeer(ms), Revision: rec.Revision}); err != nil {
		return fmt.Errorf("replay-to: %w", err)
	}
	fmt.Fprintf(n.Out, "  the store replays onto etcd from revision %d; run `quantykube undo store --ha %s` on every control-plane node (each fetches %s from here)\n", rec.Revision, StepRestoreEtcd, rec.Snapshot)
	return nil
}

func (n *Node) replayStopDo(ctx context.Context) error {
	a, err := n.admin()
	if err != nil {
		return err
	}
	defer a.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = a.ReplayTo(cctx, api.ReplayToRequest{Stop: true})
	return err
}

func (n *Node) restoreEtcdPlan() *install.Plan {
	return &install.Plan{Op: StepRestoreEtcd, Steps: []install.Step{
		{Name: "fetch-snapshot", Impact: "none: replay-to's snapshot is fetched from the node that serves it, unless it is here already (or --snapshot names one)",
			Do: n.fetchSnapshotDo, Undo: n.unfetchSnapshotDo},
		{Name: "restore", Impact: "none for clients: the local etcd member's data dir is set aside (kept) and restored from the store's snapshot with etcd's member names, peer URLs and token",
			Do: n.restoreEtcdDo, Undo: n.unrestoreEtcdDo},
		{Name: "start-etcd", Impact: "none for clients: etcd's manifest goes back; the member starts, and once a quorum is restored the store's replay reaches etcd",
			Do: n.startEtcdDo, Undo: n.stopEtcdDo},
	}}
}

func (n *Node) snapshotFile() string {
	if n.Snapshot != "" {
		return n.Snapshot
	}
	return n.Paths.replayedSnapshot()
}

func (n *Node) restoreEtcdPreflight(ctx context.Context) error {
	if err := n.checkEtcdutl(ctx); err != nil {
		return err
	}
	if _, err := os.Stat(n.Paths.savedEtcdManifest()); err != nil {
		return fmt.Errorf("etcd's manifest was not saved by stop-etcd on this node: run `quantykube undo store --ha %s` here first", StepStopEtcd)
	}
	if listening(n.Paths.localEtcdAddr()) {
		return fmt.Errorf("etcd runs on this node (%s answers); restore-etcd restores a stopped member: run `quantykube undo store --ha %s` here first", n.Paths.localEtcdAddr(), StepStopEtcd)
	}
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.ReplayingTo {
		return fmt.Errorf("the store is in mode %s, not replaying onto etcd: run `quantykube undo store --ha %s` on the first node first", st.Mode, StepReplayTo)
	}
	have, err := n.haveSnapshot(ctx, st.Since)
	if err != nil || have {
		return err
	}
	// The fetch step downloads it and checks its revision.
	if _, err := n.findSnapshotSource(ctx); err != nil {
		return fmt.Errorf("the store's snapshot is not on this node and no control-plane node serves it (%v): rerun `quantykube undo store --ha %s` on the node that ran it, or copy %s from there", err, StepReplayTo, n.snapshotFile())
	}
	return nil
}

// haveSnapshot reports whether the snapshot restore-etcd reads is here at
// the revision the store replays from. A file at another revision is
// refused, except one fetched earlier (from a replay-to run since rerun):
// that one the fetch replaces.
func (n *Node) haveSnapshot(ctx context.Context, want int64) (bool, error) {
	if _, err := os.Stat(n.snapshotFile()); err != nil {
		if n.Snapshot != "" {
			return false, fmt.Errorf("the snapshot %s (--snapshot) cannot be read: %v", n.Snapshot, err)
		}
		return false, nil
	}
	rev, err := n.snapshotRevision(ctx, n.snapshotFile())
	if err != nil {
		return false, err
	}
	if rev == want {
		return true, nil
	}
	if own, _ := n.Done(StepReplayTo); n.Snapshot == "" && !own {
		return false, nil
	}
	return false, fmt.Errorf("the store replays from revision %d, the snapshot %s is at %d: restore etcd from the snapshot replay-to saved (rerun `quantykube undo store --ha %s` on its node if it was not)", want, n.snapshotFile(), rev, StepReplayTo)
}

func (p Paths) asideFile() string { return filepath.Join(p.stepDir(StepRestoreEtcd), "aside.path") }

func (n *Node) restoreEtcdDo(ctx context.Context) error {
	dir := n.facts.EtcdDataDir
	aside, err := os.ReadFile(n.Paths.asideFile())
	if errors.Is(err, os.ErrNotExist) {
		aside = []byte(fmt.Sprintf("%s.before-undo-%s", dir, time.Now().UTC().Format("20060102T150405Z")))
		if err := os.MkdirAll(n.Paths.stepDir(StepRestoreEtcd), 0o700); err != nil {
			return err
		}
		if err := staticpod.WriteAtomic(n.Paths.asideFile(), aside, 0o600); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if _, err := os.Stat(string(aside)); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(dir, string(aside)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("set etcd's data dir aside: %w", err)
		}
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	var ic []string
	for _, m := range ms {
		ic = append(ic, m.Name+"="+m.PeerURL)
	}
	tmp := dir + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil { // a restore cut short by a crash
		return err
	}
	out, err := exec.CommandContext(ctx, n.Paths.Etcdutl, "snapshot", "restore", n.snapshotFile(), "--name", n.facts.Name,
		"--data-dir", tmp, "--initial-cluster", strings.Join(ic, ","), "--initial-cluster-token", n.facts.EtcdToken,
		"--initial-advertise-peer-urls", n.facts.EtcdPeerURL).CombinedOutput()
	if err != nil {
		return fmt.Errorf("etcdutl snapshot restore: %v: %s", err, strings.TrimSpace(string(out)))
	}
	leases, err := restoredLeaseTTLs(tmp)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("move the restored data dir into place: %w", err)
	}
	fmt.Fprintf(n.Out, "  %d leases get their full TTL, at least %d s, from etcd's first election (the snapshot had the time they had left)\n", leases, restoredLeaseGrace)
	fmt.Fprintf(n.Out, "  etcd member %s restored into %s (the old data dir is %s)\n", n.facts.Name, dir, aside)
	return nil
}

// unrestoreEtcdDo puts the set-aside data dir back.
func (n *Node) unrestoreEtcdDo(ctx context.Context) error {
	aside, err := os.ReadFile(n.Paths.asideFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(string(aside)); err != nil {
		return nil // not set aside yet, or put back already
	}
	if err := os.RemoveAll(n.facts.EtcdDataDir); err != nil {
		return err
	}
	if err := os.Rename(string(aside), n.facts.EtcdDataDir); err != nil {
		return fmt.Errorf("put etcd's data dir back: %w", err)
	}
	return os.Remove(n.Paths.asideFile())
}
