package operator

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	v1 "github.com/quantyroot/quantykube/api/v1alpha1"
)

// pass is one reconcile pass: the Installation as read, changed in place
// into the status the pass records, and the Events that go with that record.
type pass struct {
	in     *v1.Installation
	events []pendingEvent
}

type pendingEvent struct{ kind, reason, msg string }

// Event reasons, besides a Degraded reason (a refusal) and the phase a run
// ended in (Moved, Undone).
const (
	eventStepStarted = "StepStarted"
	eventStepDone    = "StepDone"
	eventStepFailed  = "StepFailed"
	eventRolledBack  = "RolledBack"
)

// event queues an Event for the Installation. record sends the queued Events
// once the status that records them is written, and drops them if the write
// fails (the pass is redone and queues them again) or the status did not
// change (what they say is already recorded, a refusal for one): a step's
// Events appear once however often its pass is retried.
func (p *pass) event(kind, reason, msg string) {
	p.events = append(p.events, pendingEvent{kind, reason, msg})
}

// retryError marks an error after which a pass records nothing and is
// retried after stepPoll: a transient one, such as the API server restarting
// during the store move.
type retryError struct{ err error }

func (e retryError) Error() string { return e.err.Error() }
func (e retryError) Unwrap() error { return e.err }

// retry wraps err as a retryError.
func retry(err error) error { return retryError{err} }

// record is the pass's one status write: it writes the status p computed
// if it differs from read (the status the pass began with), then sends the
// pass's Events. A write that conflicts with another writer fails the pass,
// which controller-runtime retries from a fresh read.
func (r *Reconciler) record(ctx context.Context, p *pass, read *v1.InstallationStatus) error {
	in := p.in
	phaseGauge.Reset()
	phaseGauge.WithLabelValues(string(in.Status.Phase)).Set(1)
	if equality.Semantic.DeepEqual(read, &in.Status) {
		return nil
	}
	if err := r.Client.Status().Update(ctx, in); err != nil {
		return fmt.Errorf("write status of installation %s: %w", in.Name, err)
	}
	for _, e := range p.events {
		r.Recorder.Eventf(in, e.kind, e.reason, "%s", e.msg)
	}
	return nil
}
