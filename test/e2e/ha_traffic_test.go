package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/quantyroot/quantykube/test/harness"
)

// haTraffic is every client the HA e2e keeps busy through the load
// balancer across the move and the undo: the harness's Clients (the
// writer with its optimistic updates, a raw watch and an informer of its
// ConfigMaps), the Prober (a read and a write every 100 ms) and a watcher
// of every Lease in the cluster (the kubelets', the controllers' and the
// API servers' own heartbeats, written through all three API servers).
type haTraffic struct {
	clients  *harness.Clients
	prober   *harness.Prober
	leases   *harness.RVWatcher
	avail    harness.Availability
	finished bool
}

// writer is the traffic's writer (its acks and gaps are figures).
func (tr *haTraffic) writer() *harness.Writer { return tr.clients.Writer }

// startTraffic makes namespace ns and starts every client in it.
func (h *haCluster) startTraffic(t *testing.T, ns string) *haTraffic {
	t.Helper()
	tr := &haTraffic{}
	tr.clients = harness.StartClients(t, h.ownClient(t), ns)
	t.Cleanup(tr.stop)
	tr.leases = harness.LeaseWatcher(h.ownClient(t))
	if err := tr.leases.Start(); err != nil {
		t.Fatal(err)
	}
	var err error
	if tr.prober, err = harness.StartProber(context.Background(), h.CS, ns, "probe", harness.ProbeInterval, harness.ProbeTimeout); err != nil {
		t.Fatal(err)
	}
	return tr
}

// stop ends the Prober and the Lease watcher (the Clients end in their
// Check). It is idempotent.
func (tr *haTraffic) stop() {
	if tr.finished {
		return
	}
	tr.finished = true
	tr.leases.Stop()
	tr.avail = tr.prober.Stop()
}

// check holds every client to its invariants and logs the figures: the
// Clients' (no acknowledged write lost or reordered, no resourceVersion
// changed without a write or below one a client held, the raw watch and
// the informer never backwards and seeing every write or relisting
// cleanly), no Lease watch that went backwards, and reads never unanswered
// for longer than readGapLimit.
func (tr *haTraffic) check(t *testing.T) {
	t.Helper()
	tr.clients.Check(t)
	tr.stop()
	t.Logf("figure: %s", tr.leases.Summary())
	if b := tr.leases.Backwards(); len(b) > 0 {
		t.Errorf("%s: resourceVersion went backwards %d times, e.g. %s", tr.leases.What(), len(b), b[0])
	}
	a := tr.avail
	t.Logf("figure: availability through the load balancer, %v", a)
	if a.Reads.LongestGap > readGapLimit {
		t.Errorf("reads went unanswered for %v (ending %s), more than %v: at some moment no API server answered reads",
			a.Reads.LongestGap.Round(time.Millisecond), a.Reads.GapEnd.UTC().Format("15:04:05.000"), readGapLimit)
	}
}

// readGapLimit is the availability bound: at every moment at least one API
// server answers reads, so a client on the load balancer never waits this
// long (its own failover included) for a successful read.
const readGapLimit = 10 * time.Second
