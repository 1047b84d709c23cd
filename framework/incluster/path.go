package incluster

import (
	"fmt"
	"io"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Metric names the path counters are read from.
const (
	// ztunnel (src/proxy/metrics.rs, registry prefix istio_): one per L4 connection, on the
	// source side (reporter="source") and on the destination side (reporter="destination").
	// framework/realfmt cites the lines.
	ztunnelConnectionsOpened = "istio_tcp_connections_opened_total"
	// The east-west gateway's Envoy: its HBONE listener's connection manager has stat prefix
	// connect_terminate (pilot/pkg/networking/core/waypoint.go:27, listener_waypoint.go:226);
	// each tunnelled connection is one CONNECT request on it, counted by the stat
	// http.connect_terminate.downstream_rq_total. Istio's bootstrap takes an
	// http_conn_manager_prefix tag only off ";"-delimited prefixes
	// (tools/packaging/common/envoy_bootstrap.json), which this one is not, so /stats/prometheus
	// writes the whole name, without labels. An Envoy whose tag extractor takes the prefix off
	// writes envoy_http_downstream_rq_total{http_conn_manager_prefix="connect_terminate"}, also
	// read.
	envoyConnectTerminateRequests = "envoy_http_connect_terminate_downstream_rq_total"
	envoyDownstreamRequests       = "envoy_http_downstream_rq_total"
	connectTerminatePrefix        = "connect_terminate"
	// Istio's bootstrap creates Envoy's http.* stats only for a pod that asks for them
	// (pkg/bootstrap/config.go getStatsOptions: the stats matcher's inclusion list), by this
	// annotation, which a gateway's pod takes from its Gateway's spec.infrastructure.annotations.
	envoyStatsInclusionAnnotation = "sidecar.istio.io/statsInclusionPrefixes"
)

// addZtunnel adds what one ztunnel's metrics say, from the view of cluster self (whose
// ztunnel it is) and the probe client workload. networkOf names a cluster's network: a connection
// between two networks went through a gateway (double HBONE), one within a network did not, even
// between clusters.
func addZtunnel(pc *probe.PathCounters, self, clientWorkload string, networkOf func(string) string, r io.Reader) error {
	families, err := parseMetrics(r)
	if err != nil {
		return fmt.Errorf("ztunnel metrics: %w", err)
	}
	f := families[ztunnelConnectionsOpened]
	if f == nil {
		return nil // a ztunnel that carried nothing yet has no series
	}
	for _, m := range f.GetMetric() {
		l := labels(m)
		n := value(m)
		if l["reporter"] == "destination" && l["destination_workload_namespace"] != workload.ProbeNamespace {
			continue // only the probes' traffic is on the path under test
		}
		switch l["reporter"] {
		case "destination":
			pc.Inbound[self] += n
			if src := l["source_cluster"]; src != "" && src != "unknown" && networkOf(src) != networkOf(self) {
				// Across networks a connection can only have come through a gateway.
				pc.InboundViaGateway[self] += n
			}
			if w := l["destination_workload"]; w != "" && w != "unknown" {
				pc.Served[self+"/"+w] += n
			}
		case "source":
			if l["source_workload"] != clientWorkload {
				continue
			}
			switch dst := l["destination_cluster"]; {
			case dst == "" || dst == "unknown":
			case networkOf(dst) == networkOf(self):
				pc.ClientHBONE += n
			default:
				pc.ClientDoubleHBONE += n
			}
		}
	}
	return nil
}

// addGateway adds the tunnels cluster self's east-west gateway terminated. A gateway whose stats
// lack the counter is an error, not zero: Envoy writes a counter it created even at 0, so its
// absence means the pod's Envoy never created it (see envoyStatsInclusionAnnotation).
func addGateway(pc *probe.PathCounters, self string, r io.Reader) error {
	families, err := parseMetrics(r)
	if err != nil {
		return fmt.Errorf("east-west gateway stats: %w", err)
	}
	var n int64
	found := false
	if f := families[envoyConnectTerminateRequests]; f != nil {
		for _, m := range f.GetMetric() {
			found = true
			n += value(m)
		}
	}
	if f := families[envoyDownstreamRequests]; f != nil {
		for _, m := range f.GetMetric() {
			if labels(m)["http_conn_manager_prefix"] == connectTerminatePrefix {
				found = true
				n += value(m)
			}
		}
	}
	if !found {
		return fmt.Errorf("east-west gateway stats: no %s (nor %s{http_conn_manager_prefix=%q}): Istio's bootstrap creates Envoy's http.* stats only when the pod asks for them; annotate the gateway's pod %s: http.%s (through the Gateway's spec.infrastructure.annotations, as the framework's install does: a gateway installed otherwise lacks it)",
			envoyConnectTerminateRequests, envoyDownstreamRequests, connectTerminatePrefix, envoyStatsInclusionAnnotation, connectTerminatePrefix)
	}
	pc.GatewayTunnels[self] += n
	return nil
}

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// value reads a counter. ztunnel writes OpenMetrics text ("# TYPE x counter" over samples named
// x_total), which the Prometheus text parser files as an untyped family x_total.
func value(m *dto.Metric) int64 {
	if c := m.GetCounter(); c != nil {
		return int64(c.GetValue())
	}
	return int64(m.GetUntyped().GetValue())
}

func labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
