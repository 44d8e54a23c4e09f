package operator

import "sigs.k8s.io/controller-runtime/pkg/controller"

// ctrlOptions: one pass at a time; the Installation is the only key.
func ctrlOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 1}
}
