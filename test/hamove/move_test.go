package hamove

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quantyroot/quantykube/internal/install/hamove"
)

// objects is QK_HAMOVE_OBJECTS: ConfigMaps loaded before the move (default 500).
func objects() int {
	if n, err := strconv.Atoi(os.Getenv("QK_HAMOVE_OBJECTS")); err == nil && n > 0 {
		return n
	}
	return 500
}

// TestHAMoveAndBack moves the 3-control-plane cluster's datastore onto a
// 3-member store and back with the coordinator, a writer and a reader
// failing over between the API servers throughout: every loaded object
// keeps its resourceVersion, every acknowledged write is there with the
// resourceVersion it was answered with, quorum reads never go backwards;
// the longest read gap, the write gap around the cut-over and cut-back and
// the total times are logged.
func TestHAMoveAndBack(t *testing.T) {
	c := setup(t)
	ctx := context.Background()
	const loadNS, writeNS = "hamove-load", "hamove-writes"
	for _, ns := range []string{loadNS, writeNS} {
		c.CS.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	waitGone(t, c, loadNS, writeNS)
	for _, ns := range []string{loadNS, writeNS} {
		if _, err := c.CS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	for i := range objects() {
		_, err := c.CS.CoreV1().ConfigMaps(loadNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("o-%05d", i)},
			Data: map[string]string{"v": fmt.Sprintf("%01024d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	before := rvs(t, c, loadNS)
	t.Logf("%d ConfigMaps of 1 KiB loaded in %v", len(before), time.Since(t0).Round(time.Millisecond))

	tctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tr := newTraffic(c.direct, writeNS)
	tr.run(tctx, &wg)
	time.Sleep(2 * time.Second)

	r := &remote{c: c}
	steps := map[string][2]time.Time{}
	progress := func(s hamove.NodeStep, out string, took time.Duration, err error) {
		steps[s.Node+"/"+s.Step] = [2]time.Time{time.Now().Add(-took), time.Now()}
		t.Logf("%s on %s: %v (err %v)\n%s", s.Step, s.Node, took.Round(time.Millisecond), err, out)
	}
	start := time.Now()
	if err := hamove.Drive(ctx, r, c.nodes, false, progress); err != nil {
		t.Fatalf("install: %v\nstatus: %s", err, c.status(false))
	}
	installed := time.Now()
	t.Logf("installed in %v; status:\n%s", installed.Sub(start).Round(time.Millisecond), c.status(false))
	time.Sleep(3 * time.Second)
	if err := hamove.Drive(ctx, r, c.nodes, true, progress); err != nil {
		t.Fatalf("undo: %v\nstatus: %s", err, c.status(true))
	}
	undone := time.Now()
	t.Logf("undone in %v; status:\n%s", undone.Sub(installed).Round(time.Millisecond), c.status(true))
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()

	readGap, writeGap := tr.gaps(start, undone)
	co := steps[c.nodes[0]+"/"+hamove.StepCutover]
	_, coWrite := tr.gaps(co[0].Add(-time.Second), co[1].Add(time.Second))
	cb := steps[c.nodes[0]+"/"+hamove.StepCutback]
	_, cbWrite := tr.gaps(cb[0].Add(-time.Second), cb[1].Add(time.Second))
	t.Logf("availability over move and undo (%v): longest read gap %v, longest write gap %v; around the cut-over %v, around the cut-back %v; %d reads, %d writes, errors %v",
		undone.Sub(start).Round(time.Millisecond), readGap.Round(time.Millisecond), writeGap.Round(time.Millisecond),
		coWrite.Round(time.Millisecond), cbWrite.Round(time.Millisecond), len(tr.reads), len(tr.writes), tr.errors)

	after := rvs(t, c, loadNS)
	changed := 0
	for k, v := range before {
		if after[k] != v {
			changed++
			if changed < 10 {
				t.Errorf("%s: resourceVersion %s before the move, %q after", k, v, after[k])
			}
		}
	}
	n := tr.check(t, c.CS)
	t.Logf("%d loaded objects kept their resourceVersions (%d changed); %d acknowledged writes checked", len(before), changed, n)
}

func rvs(t *testing.T, c *cluster, ns string) map[string]string {
	t.Helper()
	l, err := c.CS.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range l.Items {
		out[o.Name] = o.ResourceVersion
	}
	return out
}

func waitGone(t *testing.T, c *cluster, nss ...string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for _, ns := range nss {
		for {
			if _, err := c.CS.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("namespace %s still there", ns)
			}
			time.Sleep(time.Second)
		}
	}
}
