package hamove

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quantyroot/quantykube/internal/install"
	"github.com/quantyroot/quantykube/internal/install/etcdrestore"
	"github.com/quantyroot/quantykube/internal/store/mirror/api"
)

func (n *Node) cutoverPlan() *install.Plan {
	return &install.Plan{Op: StepCutover, Steps: []install.Step{
		{Name: "cutover", Commit: true, Impact: "writes pause (held, not failed) while the store applies etcd's last revision and becomes the owner; from here etcd is no longer written",
			Do: n.transition("cutover")},
		{Name: "kubeadm-config", Impact: "none: kubeadm's ClusterConfiguration names the store (127.0.0.1:2479 on every node) as external etcd",
			Do: n.recordStoreDo},
	}}
}

func (n *Node) cutoverPreflight(ctx context.Context) error {
	st, err := n.mirrorStatus(ctx)
	if err != nil {
		return err
	}
	if st.Mode != api.Mirror && st.Mode != api.Owner {
		return fmt.Errorf("the store is in mode %s; a cut-over needs it mirroring etcd", st.Mode)
	}
	ms, err := n.etcdMembers(ctx)
	if err != nil {
		return err
	}
	if sms, _, err := n.storeMembers(ctx, ms); err != nil {
		return err
	} else if started := countStarted(sms); started < len(ms) {
		return fmt.Errorf("the store has %d started members, etcd %d: run `quantykube install store --ha %s` on the nodes without a member first", started, len(ms), StepJoin)
	}
	return n.waitAPIServersOnStore(ctx, len(ms))
}

// apiServersWait bounds the cut-over preflight's wait for the API server
// pods to show every API server on the store. They are kubelet's mirror
// pods: a switch ends when its API server answers on the store, and the
// node's kubelet deletes the old mirror pod and creates the new one a few
// seconds later (more on a loaded node), so right after the last switch the
// API may list one API server fewer, or one still on etcd (CI once, stage
// 3: the cut-over refused and the move rolled back).
const apiServersWait = 2 * time.Minute

// waitAPIServersOnStore waits until nodes API server pods run on the store
// (only reading), at most n.APIServersWait; then the last reason is the error.
func (n *Node) waitAPIServersOnStore(ctx context.Context, nodes int) error {
	var last error
	said := false
	err := wait.PollUntilContextTimeout(ctx, time.Second, n.APIServersWait, true, func(ctx context.Context) (bool, error) {
		last = n.apiServersOnStore(ctx, nodes)
		if last != nil && !said {
			fmt.Fprintf(n.Out, "  waiting up to %v for the API server pods: %v\n", n.APIServersWait, last)
			said = true
		}
		return last == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case last != nil:
		return fmt.Errorf("%w (waited %v)", last, n.APIServersWait)
	}
	return err
}

// apiServersOnStore says why the API server pods do not show nodes API
// servers all on the store, or nil.
func (n *Node) apiServersOnStore(ctx context.Context, nodes int) error {
	on, err := n.APIServers(ctx)
	if err != nil {
		return err
	}
	var left []string
	for node, ep := range on {
		if !n.Paths.OnStore(ep) {
			left = append(left, node+" ("+ep+")")
		}
	}
	sort.Strings(left)
	if len(left) > 0 {
		return fmt.Errorf("API servers still on etcd: %s; run `quantykube install store --ha %s` on those nodes first", strings.Join(left, ", "), StepSwitch)
	}
	if len(on) < nodes {
		return fmt.Errorf("%d API server pods found for %d control-plane nodes; wait until every API server runs, then retry", len(on), nodes)
	}
	return nil
}

func countStarted(ms []*storeMember) int {
	k := 0
	for _, m := range ms {
		if m.Started {
			k++
		}
	}
	return k
}

// apiserversOn maps each control-plane node to the --etcd-servers its API
// server's pod runs with (kubelet's mirror pods of the static pods).
func (n *Node) apiserversOn(ctx context.Context) (map[string]string, error) {
	cs, err := n.Paths.Kube()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	pods, err := cs.CoreV1().Pods("kube-system").List(cctx, metav1.ListOptions{LabelSelector: "component=kube-apiserver"})
	if err != nil {
		return nil, fmt.Errorf("list the API server pods: %w", err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			for _, a := range c.Command {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					out[p.Spec.NodeName] = v
				}
			}
		}
	}
	return out, nil
}

// transition runs a cut-over or cut-back through the local member
// (etcdrestore.Transition) and keeps its write pause in LastPause.
func (n *Node) transition(op string) func(context.Context) error {
	return func(ctx context.Context) error {
		a, err := n.admin()
		if err != nil {
			return err
		}
		defer a.Close()
		p, err := etcdrestore.Transition(ctx, a, op, n.HoldTimeout, n.Out, n.Log)
		if p != nil {
			n.LastPause = p
		}
		return err
	}
}

func (n *Node) recordStoreDo(ctx context.Context) error {
	if n.NoKubeadmConfig {
		return nil
	}
	return n.Paths.RecordStore(ctx, n.Out)
}

func (n *Node) restoreClusterConfigDo(ctx context.Context) error {
	if n.NoKubeadmConfig {
		return nil
	}
	return n.Paths.RestoreClusterConfig(ctx, n.Out)
}
