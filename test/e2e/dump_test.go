package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dumpCluster logs what a failed follow leaves to explain it, since the
// cluster is gone once CI ends: each node's schedulability, Ready condition
// (with its last heartbeat) and taints; the operator's pods; the last Node
// events; and the tail of kube-controller-manager's log, which says why it
// marked a node or held back a replacement pod. It fails nothing itself.
func (c *cluster) dumpCluster(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if nodes, err := c.CS.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Logf("dump: nodes: %v", err)
	} else {
		for i := range nodes.Items {
			t.Logf("dump: node %s", nodeLine(&nodes.Items[i]))
		}
	}
	if pods, err := c.runningOperatorPods(); err != nil {
		t.Logf("dump: operator pods: %v", err)
	} else {
		for _, p := range pods {
			t.Logf("dump: operator pod %s on %s since %s", p.Name, p.Spec.NodeName, p.CreationTimestamp.UTC().Format(time.RFC3339))
		}
	}
	if evs, err := c.CS.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node"}); err != nil {
		t.Logf("dump: node events: %v", err)
	} else {
		items := evs.Items
		sort.SliceStable(items, func(i, j int) bool { return items[i].LastTimestamp.Before(&items[j].LastTimestamp) })
		for _, e := range items[max(0, len(items)-15):] {
			t.Logf("dump: event %s %s %s: %s", e.LastTimestamp.UTC().Format(time.RFC3339), e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", c.Kubeconfig, "-n", "kube-system", "logs", "kube-controller-manager-"+c.cp, "--tail=40")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Logf("dump: kube-controller-manager's log: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Logf("dump: kcm| %s", l)
	}
}

// nodeLine is one node as dumpCluster logs it.
func nodeLine(n *corev1.Node) string {
	ready := "no Ready condition"
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = fmt.Sprintf("Ready %s since %s (%s), heartbeat %s", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339),
				c.Reason, c.LastHeartbeatTime.UTC().Format(time.RFC3339))
		}
	}
	var taints []string
	for _, t := range n.Spec.Taints {
		taints = append(taints, t.ToString())
	}
	return fmt.Sprintf("%s unschedulable=%v %s taints=%v", n.Name, n.Spec.Unschedulable, ready, taints)
}
