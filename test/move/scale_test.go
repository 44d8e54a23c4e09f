package move

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMoveScale measures a move at several cluster sizes (QK_MOVE_SCALE,
// e.g. "5000,50000" ConfigMaps of 1 KiB in total): API-server downtime and
// copy rate of install and undo, printed as one line per size for
// docs/benchmarks.md. It asserts only that the moves succeed.
func TestMoveScale(t *testing.T) {
	sizes := os.Getenv("QK_MOVE_SCALE")
	if sizes == "" {
		t.Skip("QK_MOVE_SCALE is not set (e.g. 5000,50000); a measurement, not part of CI")
	}
	c := setup(t)
	if c.onStore(t) {
		c.mustNode(t, "quantykube", "undo", "store")
	}
	for _, f := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("QK_MOVE_SCALE: %q is not a number", f)
		}
		c.fill(t, n)
		in := c.mustNode(t, "quantykube", "install", "store")
		out := c.mustNode(t, "quantykube", "undo", "store")
		keys, rate := match(in, `(\d+) keys copied at (\d+) keys/s`)
		t.Logf("RESULT objects=%d keys=%s copy_rate_keys_per_s=%s install_downtime=%s undo_downtime=%s",
			n, keys, rate, one(in, `API-server downtime ([0-9.]+m?s)`), one(out, `API-server downtime ([0-9.]+m?s)`))
	}
}

func match(s, re string) (string, string) {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		return "?", "?"
	}
	return m[1], m[2]
}

func one(s, re string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		return "?"
	}
	return m[1]
}

// fill makes sure namespace "scale" holds n ConfigMaps of 1 KiB (32 writers).
func (c *cluster) fill(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scale"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	payload := strings.Repeat("x", 1024)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: "scale"}, Data: map[string]string{"p": payload}}
				err := retry(func() error {
					_, err := c.cs.CoreV1().ConfigMaps("scale").Create(ctx, cm, metav1.CreateOptions{})
					if apierrors.IsAlreadyExists(err) {
						return nil
					}
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
