package hamove

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

func (n *Node) cutbackPlan() *install.Plan {
	return &install.Plan{Op: StepCutback, Steps: []install.Step{
		{Name: "etcd-level", Impact: "none: waits until every etcd member answers and the replay is close to the store's revision",
			Do: n.waitReplayLevel},
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names etcd again (byte for byte when nothing else changed it)",
			Do: n.restoreClusterConfigDo, Undo: n.recordStoreDo},
		{Name: "cutback", Commit: true, Impact: "writes pause (held, not failed) while etcd applies the store's last revision; the store becomes a mirror of etcd again and forwards writes to it",
			Do: n.transition("cutback")},
		{Name: "stop-serving", Impact: "none: the server of replay-to's snapshot stops (etcd's members are restored)",
			Do: n.stopServingDo},
	}}
}

func (n *Node) cutbackPreflight(ctx context.Context) error {
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.ReplayingTo {
		return fmt.Errorf("the store is in mode %s: a cut-back needs it replaying onto etcd (`quantykube undo store --ha %s`, then %s on every node)", st.Mode, StepReplayTo, StepRestoreEtcd)
	}
	if _, err := os.Stat(filepath.Join(n.Paths.StateDir, "kubeadm-config.etcd.yaml")); err != nil {
		if done, _ := n.Done(StepCutover); !done && !n.NoKubeadmConfig {
			return fmt.Errorf("kubeadm's ClusterConfiguration saved by cutover is not on this node: run cutback on the node that ran cutover")
		}
	}
	return nil
}

// replayLevelTimeout bounds the wait for etcd's restored members and the
// replay onto them.
const replayLevelTimeout = 3 * time.Minute

// waitReplayLevel waits until every etcd member answers and the replay onto
// etcd is at most 100 revisions behind (the cut-back then holds writes only
// for the last few).
func (n *Node) waitReplayLevel(ctx context.Context) error {
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var last string
	err = wait.PollUntilContextTimeout(ctx, poll, replayLevelTimeout, true, func(ctx context.Context) (bool, error) {
		for _, m := range ms {
			u, _ := url.Parse(m.ClientURL)
			if !etcdrestore.Listening(u.Host) {
				last = "etcd member " + m.Name + " does not answer"
				return false, nil
			}
		}
		st, err := n.mirrorStatus(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if st.Failed != "" {
			return false, fmt.Errorf("the replay onto etcd failed: %s", st.Failed)
		}
		last = fmt.Sprintf("lag %d (etcd at %d, store at %d, %s)", st.Lag, st.PeerRevision, st.AppliedRevision, st.PeerError)
		return st.PeerRevision > 0 && st.Lag <= 100, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("etcd was not level with the store within %v: %s (run restore-etcd on every node)", replayLevelTimeout, last)
	}
	if err == nil {
		fmt.Fprintf(n.Out, "  etcd answers and the replay is level (%s) after %v\n", last, time.Since(start).Round(time.Millisecond))
	}
	return err
}
