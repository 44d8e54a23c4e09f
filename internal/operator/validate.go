package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ControlPlaneLabel marks kubeadm's control-plane nodes.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// validate checks what a run needs before it touches anything: a kubeadm
// cluster with one control-plane node, or an odd number of them (3 or more:
// the store's HA move keeps a quorum of its members and of etcd's). It
// returns the first control-plane node's name, or a problem stating what is
// wrong and what to do.
func (r *Reconciler) validate(ctx context.Context) (string, string, error) {
	var cm corev1.ConfigMap
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "kubeadm-config"}, &cm)
	if apierrors.IsNotFound(err) {
		return "", "this cluster was not made by kubeadm (no ConfigMap kube-system/kubeadm-config); the operator supports kubeadm clusters only — delete the Installation", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("get kube-system/kubeadm-config: %w", err)
	}
	cps, err := r.controlPlanes(ctx)
	if err != nil {
		return "", "", err
	}
	switch len(cps) {
	case 0:
		return "", fmt.Sprintf("no node is labelled %s; label the kubeadm control-plane node", ControlPlaneLabel), nil
	}
	if len(cps)%2 == 0 {
		return "", fmt.Sprintf("%d control-plane nodes (%s): the store's HA move needs an odd number (1, 3, 5…) to keep a quorum; join or remove one control-plane node with kubeadm", len(cps), strings.Join(cps, ", ")), nil
	}
	return cps[0], "", nil
}

func (r *Reconciler) controlPlanes(ctx context.Context) ([]string, error) {
	var nodes corev1.NodeList
	if err := r.APIReader.List(ctx, &nodes, client.HasLabels{ControlPlaneLabel}); err != nil {
		return nil, fmt.Errorf("list control-plane nodes: %w", err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}
