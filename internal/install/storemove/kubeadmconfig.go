package storemove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/quantyroot/quantykube/internal/install/staticpod"
)

// kubeadm keeps the cluster's ClusterConfiguration in this ConfigMap; every
// `kubeadm upgrade apply|node` renders the control plane's manifests from it.
const (
	kubeadmConfigNamespace = "kube-system"
	kubeadmConfigName      = "kubeadm-config"
	clusterConfigKey       = "ClusterConfiguration"
)

// Kube is a client of the cluster's API with the node's admin credentials.
func (p Paths) Kube() (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w; install store needs kubeadm's admin kubeconfig (or pass --kubeconfig)", p.Kubeconfig, err)
	}
	cfg.Timeout = requestTimeout
	return kubernetes.NewForConfig(cfg)
}

// externalStore is the etcd.external section that names the store, with the
// client certificate kubeadm gives kube-apiserver for its local etcd.
func (p Paths) externalStore() externalEtcd {
	return externalEtcd{Endpoints: []string{StoreURL}, CAFile: p.EtcdCA(), CertFile: p.ClientCert(), KeyFile: p.ClientKey()}
}

// readClusterConfig returns the ClusterConfiguration text of kubeadm-config.
func readClusterConfig(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	var cm *corev1.ConfigMap
	err := retry.OnError(apiBackoff, transientWhile(ctx), func() (err error) {
		cm, err = cs.CoreV1().ConfigMaps(kubeadmConfigNamespace).Get(ctx, kubeadmConfigName, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", kubeadmConfigNamespace, kubeadmConfigName, err)
	}
	cfg, ok := cm.Data[clusterConfigKey]
	if !ok {
		return nil, fmt.Errorf("%s/%s has no %s; this cluster was not made by kubeadm", kubeadmConfigNamespace, kubeadmConfigName, clusterConfigKey)
	}
	return []byte(cfg), nil
}

// apiBackoff bounds the retries of a transient API error: ~20 s in all.
var apiBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 8, Cap: 5 * time.Second}

// transientAPIError tells an error worth a retry: a conflict with another
// writer, or an API server (or the load balancer in front of several)
// briefly unable to answer — a timeout, 429, 503, a 500 from its storage
// ("etcdserver: leader changed"), a connection refused or cut.
func transientAPIError(err error) bool {
	var ne net.Error
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.As(err, &ne) && ne.Timeout()
}

// transientWhile is transientAPIError while ctx lasts.
func transientWhile(ctx context.Context) func(error) bool {
	return func(err error) bool { return ctx.Err() == nil && transientAPIError(err) }
}

// writeClusterConfig replaces the ClusterConfiguration text of kubeadm-config
// with the one change returns for the current text (nil: leave it), retried
// on conflicts with other writers and on transient errors (change sees the
// text as it is then: an update that landed though its answer was lost
// reads as done).
func writeClusterConfig(ctx context.Context, cs kubernetes.Interface, change func(cur []byte) ([]byte, error)) error {
	return retry.OnError(apiBackoff, transientWhile(ctx), func() error {
		cm, err := cs.CoreV1().ConfigMaps(kubeadmConfigNamespace).Get(ctx, kubeadmConfigName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read %s/%s: %w", kubeadmConfigNamespace, kubeadmConfigName, err)
		}
		next, err := change([]byte(cm.Data[clusterConfigKey]))
		if err != nil || next == nil {
			return err
		}
		cm.Data[clusterConfigKey] = string(next)
		if _, err := cs.CoreV1().ConfigMaps(kubeadmConfigNamespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update %s/%s: %w", kubeadmConfigNamespace, kubeadmConfigName, err)
		}
		return nil
	})
}

// checkClusterConfig is install's preflight of kubeadm-config: readable with
// the admin kubeconfig and a ClusterConfiguration the step can edit.
func (p Paths) checkClusterConfig(ctx context.Context) error {
	cs, err := p.Kube()
	if err != nil {
		return err
	}
	cfg, err := readClusterConfig(ctx, cs)
	if err != nil {
		return fmt.Errorf("%w; check that the API server answers with %s", err, p.Kubeconfig)
	}
	if _, err := withExternalEtcd(cfg, p.externalStore()); err != nil {
		return fmt.Errorf("%s/%s: %w; fix the ConfigMap (kubeadm writes it with `kubeadm init phase upload-config kubeadm`)", kubeadmConfigNamespace, kubeadmConfigName, err)
	}
	return nil
}

// recordStoreDo makes kubeadm's ClusterConfiguration name the store as the
// cluster's external etcd (the API server's etcd client certificate with
// it), saving the text it replaces first: `kubeadm upgrade apply|node` and
// `kubeadm init phase control-plane` then render the API server onto the
// store and leave etcd's static pod alone. Idempotent.
func (m *Mover) recordStoreDo(ctx context.Context) error { return m.Paths.RecordStore(ctx, m.Out) }

// RecordStore is recordStoreDo for any caller: the ClusterConfiguration it
// replaces is saved under p.StateDir; progress goes to out.
func (p Paths) RecordStore(ctx context.Context, out io.Writer) error {
	cs, err := p.Kube()
	if err != nil {
		return err
	}
	return writeClusterConfig(ctx, cs, func(cur []byte) ([]byte, error) {
		if slices.Equal(etcdEndpointsOf(cur), []string{StoreURL}) {
			return nil, nil // a rerun: done already
		}
		if err := staticpod.WriteAtomic(p.savedClusterConfig(), cur, 0o600); err != nil {
			return nil, fmt.Errorf("save kubeadm's ClusterConfiguration: %w", err)
		}
		next, err := withExternalEtcd(cur, p.externalStore())
		if err != nil {
			return nil, err
		}
		if err := staticpod.WriteAtomic(p.storeClusterConfig(), next, 0o600); err != nil {
			return nil, fmt.Errorf("save the store's ClusterConfiguration: %w", err)
		}
		fmt.Fprintf(out, "  %s/%s names the store as external etcd (kubeadm upgrade keeps the API server on it)\n", kubeadmConfigNamespace, kubeadmConfigName)
		return next, nil
	})
}

// restoreClusterConfigDo puts kubeadm's ClusterConfiguration back: byte for
// byte when nothing but the move changed it; when kubeadm rewrote it since
// (an upgrade), only its etcd section is put back. Idempotent.
func (m *Mover) restoreClusterConfigDo(ctx context.Context) error {
	return m.Paths.RestoreClusterConfig(ctx, m.Out)
}

// RestoreClusterConfig is restoreClusterConfigDo for any caller (the saved
// text under p.StateDir; progress to out).
func (p Paths) RestoreClusterConfig(ctx context.Context, out io.Writer) error {
	orig, err := os.ReadFile(p.savedClusterConfig())
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "  no saved ClusterConfiguration (the move did not change %s/%s); left as it is\n", kubeadmConfigNamespace, kubeadmConfigName)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the saved ClusterConfiguration: %w", err)
	}
	ours, _ := os.ReadFile(p.storeClusterConfig())
	cs, err := p.Kube()
	if err != nil {
		return err
	}
	return writeClusterConfig(ctx, cs, func(cur []byte) ([]byte, error) {
		if !slices.Contains(etcdEndpointsOf(cur), StoreURL) {
			return nil, nil // restored already
		}
		if bytes.Equal(cur, ours) {
			fmt.Fprintf(out, "  %s/%s restored byte for byte\n", kubeadmConfigNamespace, kubeadmConfigName)
			return orig, nil
		}
		fmt.Fprintf(out, "  %s/%s changed since the move (kubeadm upgrade?): only its etcd section was put back\n", kubeadmConfigNamespace, kubeadmConfigName)
		return withEtcdSectionOf(cur, orig)
	})
}
