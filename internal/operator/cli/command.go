// Package cli is the `quantykube operator` command: the operator itself, and
// `operator host`, which the operator's host pods run.
package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quantyroot/quantykube/internal/operator"
	"github.com/quantyroot/quantykube/internal/version"
)

// NewCommand is `quantykube operator`.
func NewCommand() *cobra.Command {
	var leaderElect bool
	var metricsAddr, probeAddr, image, namespace, logLevel string
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the QuantyKube operator: move the cluster as the Installation \"quantykube\" asks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			if image == "" {
				return errors.New("no image for the host pods; set --image or QUANTYKUBE_IMAGE to this binary's image")
			}
			log.SetLogger(logrFrom(logger))
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return fmt.Errorf("find the cluster (in-cluster or KUBECONFIG): %w", err)
			}
			logger.Info("connecting", "apiserver", cfg.Host)
			mgr, err := operator.NewManager(cfg, operator.Options{
				Image: image, Namespace: namespace, LeaderElect: leaderElect,
				MetricsAddr: metricsAddr, ProbeAddr: probeAddr, Log: logger,
				// The downward API names the operator's own pod (deploy/).
				PodName: os.Getenv("POD_NAME"), PodNamespace: os.Getenv("POD_NAMESPACE"),
			})
			if err != nil {
				return err
			}
			logger.Info("operator starting", "version", version.Version, "commit", version.Commit, "image", image, "namespace", namespace, "leaderElect", leaderElect)
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&leaderElect, "leader-elect", false, "elect one active operator through a Lease in --namespace")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address (0 turns it off)")
	f.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address")
	f.StringVar(&image, "image", os.Getenv("QUANTYKUBE_IMAGE"), "the quantykube image the host pods run (env QUANTYKUBE_IMAGE)")
	f.StringVar(&namespace, "namespace", operator.Namespace, "the operator's namespace, where its host pods run")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cmd.AddCommand(newHostCommand())
	return cmd
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q is not a level; use debug, info, warn or error", level)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
