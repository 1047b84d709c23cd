package inpod

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ConnectionsOpened is ztunnel's connection counter (src/proxy/metrics.rs, registry prefix
// istio_), with the labels the probes read: one series per reporter, source and destination.
const ConnectionsOpened = "istio_tcp_connections_opened_total"

var connectionLabels = []string{"reporter", "source_workload", "source_workload_namespace", "source_cluster",
	"destination_service", "destination_workload", "destination_workload_namespace", "destination_cluster",
	"request_protocol", "connection_security_policy"}

// Metrics are what the emulated ztunnel serves on 15020, as ztunnel does.
type Metrics struct {
	registry *prometheus.Registry
	opened   *prometheus.CounterVec
}

// NewMetrics registers ztunnel's counter.
func NewMetrics() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry(), opened: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: ConnectionsOpened, Help: "The total number of TCP connections opened",
	}, connectionLabels)}
	m.registry.MustRegister(m.opened)
	return m
}

// Connection labels one opened connection; empty fields are "unknown", as ztunnel writes them.
type Connection struct {
	Reporter                                                      string // "source" or "destination"
	SourceWorkload, SourceNamespace, SourceCluster                string
	DestinationService                                            string
	DestinationWorkload, DestinationNamespace, DestinationCluster string
	MutualTLS                                                     bool
}

// Opened counts c.
func (m *Metrics) Opened(c Connection) {
	or := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	policy := "unknown"
	if c.MutualTLS {
		policy = "mutual_tls"
	}
	m.opened.WithLabelValues(c.Reporter, or(c.SourceWorkload), or(c.SourceNamespace), or(c.SourceCluster),
		or(c.DestinationService), or(c.DestinationWorkload), or(c.DestinationNamespace), or(c.DestinationCluster),
		"tcp", policy).Inc()
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
