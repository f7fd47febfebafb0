package serve

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are what GET /metrics exposes, in Prometheus' text format. Each
// server has its own registry (tests start several servers in one
// process).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec   // by model and protocol
	failures *prometheus.CounterVec   // by model, protocol and reason
	latency  *prometheus.HistogramVec // request to response, by model
	queue    *prometheus.HistogramVec // enqueued to run, by model
	batch    *prometheus.HistogramVec // requests per run, by model
	rows     *prometheus.HistogramVec // rows (dim 0) per run, by model
	captured *prometheus.CounterVec   // capture: written or dropped
}

// unknownModel is the model label of requests naming no loaded model
// (a label per name asked for would let clients grow the series without
// bound).
const unknownModel = "_unknown"

func newMetrics() *metrics {
	latencyBuckets := prometheus.ExponentialBuckets(50e-6, 2, 18) // 50 µs to ~6.5 s
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_inference_requests_total",
			Help: "Inference requests received, by model and protocol."}, []string{"model", "protocol"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_inference_failures_total",
			Help: "Inference requests answered with an error, by model, protocol and reason (bad_request, unavailable, timeout, internal)."},
			[]string{"model", "protocol", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_inference_request_duration_seconds",
			Help: "Time from receiving an inference request to answering it, by model.", Buckets: latencyBuckets}, []string{"model"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_inference_queue_duration_seconds",
			Help: "Time a request waited in its model's queue before an instance ran it, by model.", Buckets: latencyBuckets}, []string{"model"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_inference_batch_requests",
			Help:    "Requests run together in one inference (1 without dynamic batching), by model.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128}}, []string{"model"}),
		rows: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kiln_inference_batch_size",
			Help:    "Rows (dim 0 of the inputs) of one inference, by model.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}}, []string{"model"}),
		captured: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kiln_capture_samples_total",
			Help: "Request inputs sampled by --capture, by outcome: written, or dropped (the writer's buffer was full, or writing failed)."},
			[]string{"outcome"}),
	}
	m.registry.MustRegister(m.requests, m.failures, m.latency, m.queue, m.batch, m.rows, m.captured,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// reason is a failure's reason label.
func reason(err error) string {
	return [...]string{BadRequest: "bad_request", Unavailable: "unavailable", Timeout: "timeout", Internal: "internal"}[kindOf(err)]
}

// observe counts a request to model over protocol that took since start
// and ended with err.
func (s *Server) observe(model, protocol string, start time.Time, err error) {
	s.mu.Lock()
	if s.models[model] == nil {
		model = unknownModel
	}
	s.mu.Unlock()
	s.metrics.requests.WithLabelValues(model, protocol).Inc()
	if err != nil {
		s.metrics.failures.WithLabelValues(model, protocol, reason(err)).Inc()
		return
	}
	s.metrics.latency.WithLabelValues(model).Observe(time.Since(start).Seconds())
}
