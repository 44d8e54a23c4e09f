package operator

import "sigs.k8s.io/controller-runtime/pkg/controller"

// ctrlOptions: one pass at a time, and this is required, not a tuning.
//
// A pass acts on the one step recorded in status and records what it found
// (the next step) in its one status write; only then may another pass act.
// Two passes at once would both act on the same recorded step before either
// wrote: two host pods for one attempt or journal check, a node cordoned by
// one pass while the other records it as "cordoned before us", a drain
// racing a failure's uncordon. The status write's resourceVersion check
// would reject the second write, but only after both had acted on the
// cluster. The status is the operator's lock; one worker is what makes it
// one.
//
// controller-runtime's queue never hands one key to two workers, and every
// watch maps to the one Installation (the CRD admits only the name
// quantykube), so today one worker is also what the queue would give; set
// here it stays so if another key ever appears. Leader election keeps a
// second operator process from acting at all.
func ctrlOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 1}
}
