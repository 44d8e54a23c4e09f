package operator

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	stepsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quantykube_operator_steps_started_total",
		Help: "Steps begun, by step and operation (install or undo).",
	}, []string{"step", "op"})
	stepsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quantykube_operator_steps_ended_total",
		Help: "Steps ended, by step, operation and result (done or failed).",
	}, []string{"step", "op", "result"})
	stepSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "quantykube_operator_step_duration_seconds",
		Help:    "Duration of steps that ended well.",
		Buckets: prometheus.ExponentialBuckets(0.5, 2, 12),
	}, []string{"step", "op"})
	phaseGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quantykube_operator_phase",
		Help: "1 for the Installation's current phase.",
	}, []string{"phase"})
)

func init() {
	metrics.Registry.MustRegister(stepsStarted, stepsEnded, stepSeconds, phaseGauge)
}
