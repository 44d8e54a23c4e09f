package operator

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
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

// validateSpec checks the spec's own values before a run starts: each
// deadline must be positive, spec.retry not negative. It returns one line
// naming the field, its value and the fix, or "". (The CRD already refuses
// negative durations and a negative spec.retry; a zero duration passes its
// pattern.)
func validateSpec(in *v1.Installation) string {
	for _, d := range []struct {
		field string
		v     *metav1.Duration
		def   time.Duration
	}{
		{"spec.nodeTimeout", in.Spec.NodeTimeout, defaultNodeTimeout},
		{"spec.storeTimeout", in.Spec.StoreTimeout, defaultStoreTimeout},
	} {
		if d.v != nil && d.v.Duration <= 0 {
			return fmt.Sprintf("%s is %v: a deadline must be positive; set it to a duration such as %v (its default), or remove it", d.field, d.v.Duration, d.def)
		}
	}
	if in.Spec.Retry < 0 {
		return fmt.Sprintf("spec.retry is %d: it counts retries and cannot be negative; set it to %d to retry", in.Spec.Retry, in.Status.ObservedRetry+1)
	}
	return ""
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
