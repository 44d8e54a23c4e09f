package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Informer is client-go's shared informer of the ConfigMaps of one
// namespace, as a controller runs it: its reflector lists, watches, opens
// the watch again after it ends and relists on "410 Gone". It records every
// update whose object's resourceVersion is below the one its cache held
// (a relist or an event that went back in time: a controller would act on
// stale data).
type Informer struct {
	ns        string
	informer  cache.SharedIndexInformer
	stop      chan struct{}
	mu        sync.Mutex
	adds      int
	updates   int
	backwards []string
}

// StartInformer starts the informer and waits for its first list.
func StartInformer(t testing.TB, cs kubernetes.Interface, ns string) *Informer {
	t.Helper()
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	i := &Informer{ns: ns, informer: f.Core().V1().ConfigMaps().Informer(), stop: make(chan struct{})}
	if _, err := i.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { i.mu.Lock(); i.adds++; i.mu.Unlock() },
		UpdateFunc: i.update,
	}); err != nil {
		t.Fatal(err)
	}
	f.Start(i.stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), i.informer.HasSynced) {
		close(i.stop)
		t.Fatalf("the informer of ConfigMaps in %s did not sync within a minute", ns)
	}
	t.Cleanup(i.Stop)
	return i
}

func (i *Informer) update(oldObj, newObj any) {
	o, ok1 := oldObj.(*corev1.ConfigMap)
	n, ok2 := newObj.(*corev1.ConfigMap)
	if !ok1 || !ok2 {
		return
	}
	ov, _ := strconv.ParseInt(o.ResourceVersion, 10, 64)
	nv, _ := strconv.ParseInt(n.ResourceVersion, 10, 64)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.updates++
	if nv < ov {
		i.backwards = append(i.backwards, fmt.Sprintf("%s went from resourceVersion %d to %d", n.Name, ov, nv))
	}
}

// Stop ends the informer. Idempotent.
func (i *Informer) Stop() {
	select {
	case <-i.stop:
	default:
		close(i.stop)
	}
}

// differs is the first object whose resourceVersion in the informer's
// cache is not want's ("" when they agree on every object in want).
func (i *Informer) differs(want map[string]int64) string {
	for name, rv := range want {
		obj, ok, _ := i.informer.GetStore().GetByKey(i.key(name))
		if !ok {
			return fmt.Sprintf("%s is not in the informer's cache (the cluster has it at %d)", name, rv)
		}
		got, _ := strconv.ParseInt(obj.(*corev1.ConfigMap).ResourceVersion, 10, 64)
		if got != rv {
			return fmt.Sprintf("%s is at %d in the informer's cache, at %d in the cluster", name, got, rv)
		}
	}
	return ""
}

func (i *Informer) key(name string) string { return i.ns + "/" + name }

// Check waits (up to catchUp) until the informer's cache holds every object
// of final at final's resourceVersion, then stops it and fails the test on
// a cache that did not converge or went back in time.
func (i *Informer) Check(t testing.TB, final map[string]int64, catchUp time.Duration) {
	t.Helper()
	deadline := time.Now().Add(catchUp)
	diff := i.differs(final)
	for diff != "" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // the informer's own pace; nothing to wait on
		diff = i.differs(final)
	}
	i.Stop()
	i.mu.Lock()
	defer i.mu.Unlock()
	t.Logf("figure: informer: %d adds, %d updates; its cache holds the cluster's %d objects at their resourceVersions: %v", i.adds, i.updates, len(final), diff == "")
	if diff != "" {
		t.Errorf("informer: its cache did not reach the cluster's state within %v: %s", catchUp, diff)
	}
	if len(i.backwards) > 0 {
		t.Errorf("informer: %d updates went back in time, e.g. %s", len(i.backwards), i.backwards[0])
	}
}
