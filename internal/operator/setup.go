package operator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// SetupWithManager registers the reconciler (one pass at a time) and the
// runnable that creates the Installation when it is absent.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.defaults()
	toInstallation := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: v1.Name}}}
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("installation").
		// Spec changes start passes; our own status writes do not: the
		// next pass comes from RequeueAfter (passes a second or more apart,
		// one step each) or from a host pod or node changing.
		For(&v1.Installation{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		Watches(&corev1.Node{}, toInstallation, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(ctrlOptions()). // one pass at a time: ctrlOptions says why it must be

		Complete(r)
	if err != nil {
		return fmt.Errorf("set up the installation controller: %w", err)
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		return EnsureInstallation(ctx, mgr.GetClient())
	}))
}

// EnsureInstallation creates the Installation "quantykube" when absent: the
// store, and the runtime on every node labelled RuntimeLabel=RuntimeLabelValue.
func EnsureInstallation(ctx context.Context, c client.Client) error {
	in := &v1.Installation{
		ObjectMeta: metav1.ObjectMeta{Name: v1.Name},
		Spec: v1.InstallationSpec{
			Store:   true,
			Runtime: v1.RuntimeSpec{NodeSelector: map[string]string{v1.RuntimeLabel: v1.RuntimeLabelValue}},
		},
	}
	err := c.Create(ctx, in)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create installation %s: %w", v1.Name, err)
	}
	return nil
}
