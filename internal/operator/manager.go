package operator

import (
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Options configure the operator's manager.
type Options struct {
	Image       string // the quantykube image of the host pods
	Namespace   string // the operator's namespace (default Namespace)
	LeaderElect bool
	MetricsAddr string // "0" turns metrics off
	ProbeAddr   string // "0" turns probes off
	Log         *slog.Logger
	// PodName and PodNamespace name the operator's own pod (empty outside one).
	PodName, PodNamespace string
	skipNameChecks        bool // tests start several managers in one process
}

// NewManager builds the operator: the manager (leader election through a
// Lease in the namespace, released on shutdown so a successor starts at
// once), the reconciler and the health checks.
func NewManager(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.Namespace == "" {
		o.Namespace = Namespace
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	// A store move stops the API server for 5-20 s; leases that outlast it
	// keep the operator from losing leadership (and restarting) mid-move.
	lease, renew, retry := 60*time.Second, 45*time.Second, 5*time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "quantykube-operator",
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		Controller:                    config.Controller{SkipNameValidation: &o.skipNameChecks},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only the host pods are cached, not every pod of the cluster.
			&corev1.Pod{}: {Namespaces: map[string]cache.Config{o.Namespace: {}}},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create a clientset: %w", err)
	}
	r := &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kube: kube, Log: o.Log, Image: o.Image, Namespace: o.Namespace,
		PodName: o.PodName, PodNamespace: o.PodNamespace,
		Recorder: mgr.GetEventRecorderFor("quantykube-operator"),
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add ready check: %w", err)
	}
	return mgr, nil
}
