package harness

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Clients are the clients a test keeps busy in one namespace while it
// changes what the API server stands on (a move, an upgrade, an undo), to
// hold the cluster to what a controller relies on: the Writer (creates and
// optimistic updates), a raw watch of its ConfigMaps from the first list
// on (RVWatcher), and a client-go informer of them.
type Clients struct {
	NS       string
	Writer   *Writer
	Watch    *RVWatcher
	Informer *Informer
	checked  bool
}

// CatchUp bounds the wait for the watchers to see the writer's last
// acknowledged write once it stopped.
const CatchUp = time.Minute

// StartClients makes namespace ns (deleted when the test ends) and starts
// the watch, the informer and then the writer in it.
func StartClients(t testing.TB, cs kubernetes.Interface, ns string) *Clients {
	t.Helper()
	err := Retry(func() error {
		_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	c := &Clients{NS: ns, Watch: ConfigMapWatcher(cs, ns)}
	t.Cleanup(func() {
		c.stop()
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if err := c.Watch.Start(); err != nil {
		t.Fatal(err)
	}
	c.Informer = StartInformer(t, cs, ns)
	c.Writer = StartWriter(t, cs, ns)
	return c
}

func (c *Clients) stop() {
	if c.Writer != nil {
		c.Writer.Stop()
	}
	c.Watch.Stop()
	if c.Informer != nil {
		c.Informer.Stop()
	}
}

// Check stops the writer, waits for the watch to see its last write, and
// holds every client to its invariants: every acknowledged write kept with
// its resourceVersion, no resourceVersion changed without a write or went
// below one a client held (Writer.Check), the raw watch never backwards
// and missing no acknowledged write outside a relist's span (a clean 410
// relist), and the informer's cache converged on the cluster's objects
// without going back in time. It logs the figures. Once per test.
func (c *Clients) Check(t testing.TB) {
	t.Helper()
	if c.checked {
		return
	}
	c.checked = true
	final := c.Writer.Check(t)
	last := c.Writer.LastAck()
	deadline := time.Now().Add(CatchUp)
	for c.Watch.LastRV() < last && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // the watch's own pace; nothing to wait on
	}
	c.Watch.Stop()
	t.Logf("figure: %s", c.Watch.Summary())
	if b := c.Watch.Backwards(); len(b) > 0 {
		t.Errorf("%s: resourceVersion went backwards %d times, e.g. %s", c.Watch.What(), len(b), b[0])
	}
	acks := c.Writer.Acks()
	missed, excused := c.Watch.Missed(acks)
	t.Logf("figure: %s saw %d of %d acknowledged writes (%d inside a relist's span)", c.Watch.What(), len(acks)-len(missed)-excused, len(acks), excused)
	if len(missed) > 0 {
		t.Errorf("%s missed %d acknowledged writes, e.g. %s at %d", c.Watch.What(), len(missed), missed[0].Name, missed[0].RV)
	}
	c.Informer.Check(t, final, CatchUp)
}
