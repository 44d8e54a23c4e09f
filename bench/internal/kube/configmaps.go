package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Namespace holds the workload's ConfigMaps.
const Namespace = "qk-bench"

// Result is what one ConfigMap workload measured.
type Result struct {
	CreatePerSec, UpdatePerSec, DeletePerSec float64
	// ListLatency is the median of the full LISTs; ListItems is what they returned.
	ListLatency time.Duration
	ListItems   int
}

// RunConfigMaps creates n ConfigMaps (valueSize bytes of data each) with
// `clients` concurrent clients, updates each once, LISTs them all `lists`
// times, then deletes them.
func RunConfigMaps(ctx context.Context, cfg *rest.Config, n, valueSize, clients, lists int) (Result, error) {
	var r Result
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, clients*2
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return r, fmt.Errorf("clientset: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return r, fmt.Errorf("create namespace %s: %w", Namespace, err)
	}
	cms := cs.CoreV1().ConfigMaps(Namespace)
	name := func(i int) string { return fmt.Sprintf("cm-%06d", i) }
	val := strings.Repeat("x", valueSize)
	rvs := make([]*corev1.ConfigMap, n)

	d, err := parallel(ctx, n, clients, func(ctx context.Context, i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Data: map[string]string{"v": val}}
		out, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create configmap %s: %w", name(i), err)
		}
		rvs[i] = out
		return nil
	})
	if err != nil {
		return r, err
	}
	r.CreatePerSec = float64(n) / d.Seconds()

	upd := strings.Repeat("y", valueSize)
	d, err = parallel(ctx, n, clients, func(ctx context.Context, i int) error {
		cm := rvs[i].DeepCopy()
		cm.Data["v"] = upd
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update configmap %s: %w", name(i), err)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.UpdatePerSec = float64(n) / d.Seconds()

	lat := make([]time.Duration, 0, lists)
	for k := 0; k < lists; k++ {
		t := time.Now()
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return r, fmt.Errorf("list configmaps: %w", err)
		}
		lat = append(lat, time.Since(t))
		r.ListItems = len(l.Items)
		if r.ListItems != n {
			return r, fmt.Errorf("list returned %d configmaps, want %d", r.ListItems, n)
		}
	}
	r.ListLatency = median(lat)

	d, err = parallel(ctx, n, clients, func(ctx context.Context, i int) error {
		if err := cms.Delete(ctx, name(i), metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete configmap %s: %w", name(i), err)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.DeletePerSec = float64(n) / d.Seconds()
	return r, nil
}

// parallel runs op for i in [0,n) on `workers` goroutines; the first error
// stops it.
func parallel(ctx context.Context, n, workers int, op func(context.Context, int) error) (time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := op(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), firstErr
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
