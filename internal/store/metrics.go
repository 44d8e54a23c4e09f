package store

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/quantyroot/quantykube/internal/store/mvcc"
)

// healthProbe is the read /health makes, as etcd's does.
var healthProbe = &pb.RangeRequest{Key: []byte("health")}

// metrics are the store's Prometheus metrics, named
// quantykube_store_<name>_<unit>.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	store    *mvcc.Store
}

// readAheadPages reports the API's pages read ahead (etcdapi.Server).
type readAheadPages interface {
	ReadAheadPages() (served, unused int64)
}

func newMetrics(st *mvcc.Store, api readAheadPages) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), store: st}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "quantykube_store_requests_total", Help: "gRPC requests by method and status code.",
	}, []string{"method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "quantykube_store_request_duration_seconds", Help: "Latency of unary gRPC requests.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"method"})
	rev := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "quantykube_store_revision", Help: "Current revision.",
	}, func() float64 { return float64(st.Rev()) })
	compacted := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "quantykube_store_compacted_revision", Help: "Compacted revision.",
	}, func() float64 { return float64(st.CompactedRev()) })
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "quantykube_store_disk_size_bytes", Help: "Bytes the data dir uses on disk.",
	}, func() float64 { t, _ := st.Size(); return float64(t) })
	aheadServed := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "quantykube_store_range_read_ahead_served_total", Help: "Pages of paginated ranges read ahead that answered a request.",
	}, func() float64 { n, _ := api.ReadAheadPages(); return float64(n) })
	aheadUnused := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "quantykube_store_range_read_ahead_unused_total", Help: "Pages of paginated ranges read ahead and dropped without answering a request.",
	}, func() float64 { _, n := api.ReadAheadPages(); return float64(n) })
	m.reg.MustRegister(m.requests, m.latency, rev, compacted, size, aheadServed, aheadUnused, newMemoryCollector(st),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	m.latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return resp, err
}

func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	return err
}

// register serves /metrics, and /health, /readyz and /livez answering as
// etcd's /health does ({"health":"true"}) once a read succeeds.
func (m *metrics) register(mux *http.ServeMux) {
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	healthy := func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		body := map[string]string{"health": "true", "reason": ""}
		code := http.StatusOK
		if _, err := m.store.Range(ctx, healthProbe); err != nil {
			body = map[string]string{"health": "false", "reason": err.Error()}
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	}
	mux.HandleFunc("/health", healthy)
	mux.HandleFunc("/readyz", healthy)
	mux.HandleFunc("/livez", healthy)
}
