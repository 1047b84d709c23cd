package incluster

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/realfmt"
	"github.com/ambientmc/ambientmc/framework/realfmt/eastwest"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// The readers of a real ztunnel and a real east-west gateway, against what those write as their
// upstream sources define it (framework/realfmt cites each name), not against the emulator.

// The readers reach the ports and paths ztunnel and Istio's Envoy serve.
func TestReadersUseTheRealEndpoints(t *testing.T) {
	assert.Equal(t, realfmt.ZtunnelAdminPort, ztunnelAdminPort)
	assert.Equal(t, strconv.Itoa(realfmt.ZtunnelStatsPort), ztunnelStatsPort)
	assert.Equal(t, strconv.Itoa(realfmt.EnvoyPrometheusPort), envoyStatsPort)
	assert.Equal(t, realfmt.EnvoyStatsInclusionAnnotation, envoyStatsInclusionAnnotation)
}

// testdata/ztunnel-config-dump.json, which the config-dump tests read, is a ztunnel dump: every
// key one ztunnel writes, with the keys it always writes (realfmt cites each field's line at
// realfmt.ZtunnelCommit), and so are the variants the tests derive from it.
func TestZtunnelDumpFixtureIsZtunnels(t *testing.T) {
	require.NoError(t, realfmt.CheckZtunnelDump(converged(t)))
	require.NoError(t, realfmt.CheckZtunnelDump(beforeFailoverConverged(t)))
}

// What the reader takes from the dump comes from ztunnel's field names: the cluster (clusterId),
// network, status and capacity of the workload an endpoint (workloadUid) of a service (hostname)
// names. The split-horizon workload of echo-remote stands for 2 pods: a capacity that is not
// the default 1 is read from "capacity".
func TestReadZtunnelDumpReadsZtunnelsFields(t *testing.T) {
	held, err := readZtunnelDump(converged(t), workload.ProbeNamespace, probeApps, cluster2)
	require.NoError(t, err)
	assert.Equal(t, remoteHolding{found: true, remoteHealthy: 1, remoteCapacity: 2,
		endpoints: []string{"network-2/cluster-2 Healthy"}}, held[probe.EchoRemote])
	assert.Equal(t, remoteHolding{found: true, remoteHealthy: 1, remoteCapacity: 1,
		endpoints: []string{"network-1/cluster-1 Healthy", "network-2/cluster-2 Healthy"}}, held[probe.EchoFailover])
}

// ztunnelSeries are the connections one ztunnel counted, labelled by ztunnel's own label names
// (realfmt.ZtunnelConnectionsOpenedText rejects any other).
func ztunnelMetrics(t *testing.T, series ...realfmt.ZtunnelSeries) string {
	t.Helper()
	text, err := realfmt.ZtunnelConnectionsOpenedText(series...)
	require.NoError(t, err)
	return realfmt.ZtunnelExposition(text, realfmt.ZtunnelBuildText("1.31.0"))
}

// The path counters from ztunnels' /metrics as ztunnel writes them. A reader that looked for
// another metric or label name than ztunnel's would count nothing here.
func TestPathCountersFromZtunnelsExposition(t *testing.T) {
	const (
		src = realfmt.ZtunnelReporterSource
		dst = realfmt.ZtunnelReporterDestination
	)
	// The client's ztunnel in cluster-1: its outbound connections (reporter source, labelled with
	// the workload the connection went to: src/proxy/outbound.rs:500-507; for echo-remote the
	// split-horizon workload, which has no workload name but cluster-2's cluster ID), and the
	// inbound ones of its node's echo-local.
	client := ztunnelMetrics(t,
		realfmt.ZtunnelSeries{Value: 40, Labels: map[string]string{"reporter": src, "source_workload": "fortio-client", "source_workload_namespace": "probe",
			"source_cluster": "cluster-1", "destination_service": "echo-local.probe.svc.cluster.local", "destination_workload": "echo-local",
			"destination_workload_namespace": "probe", "destination_cluster": "cluster-1", "connection_security_policy": realfmt.ZtunnelMutualTLS}},
		realfmt.ZtunnelSeries{Value: 25, Labels: map[string]string{"reporter": src, "source_workload": "fortio-client", "source_workload_namespace": "probe",
			"source_cluster": "cluster-1", "destination_service": "echo-remote.probe.svc.cluster.local", "destination_workload_namespace": "probe",
			"destination_cluster": "cluster-2", "connection_security_policy": realfmt.ZtunnelMutualTLS}},
		realfmt.ZtunnelSeries{Value: 7, Labels: map[string]string{"reporter": src, "source_workload": "prometheus", "source_workload_namespace": "monitoring",
			"source_cluster": "cluster-1", "destination_workload": "echo-local", "destination_workload_namespace": "probe", "destination_cluster": "cluster-1"}},
		realfmt.ZtunnelSeries{Value: 40, Labels: map[string]string{"reporter": dst, "source_workload": "fortio-client", "source_workload_namespace": "probe",
			"source_cluster": "cluster-1", "destination_workload": "echo-local", "destination_workload_namespace": "probe", "destination_cluster": "cluster-1",
			"connection_security_policy": realfmt.ZtunnelMutualTLS}},
		realfmt.ZtunnelSeries{Value: 99, Labels: map[string]string{"reporter": dst, "destination_workload": "coredns",
			"destination_workload_namespace": "kube-system", "destination_cluster": "cluster-1"}},
	)
	// cluster-2's ztunnel: inbound through the gateway (the source from the tunnel's baggage,
	// src/proxy/inbound.rs:446-486, with the locality labels it brings), and from its own cluster.
	remote := ztunnelMetrics(t,
		realfmt.ZtunnelSeries{Value: 25, Labels: map[string]string{"reporter": dst, "source_workload": "fortio-client", "source_workload_namespace": "probe",
			"source_cluster": "cluster-1", "source_region": "region-1", "destination_workload": "echo-remote", "destination_workload_namespace": "probe",
			"destination_cluster": "cluster-2", "connection_security_policy": realfmt.ZtunnelMutualTLS}},
		realfmt.ZtunnelSeries{Value: 3, Labels: map[string]string{"reporter": dst, "source_workload": "fortio-client", "source_workload_namespace": "probe",
			"source_cluster": "cluster-2", "destination_workload": "echo-failover", "destination_workload_namespace": "probe",
			"destination_cluster": "cluster-2", "connection_security_policy": realfmt.ZtunnelMutualTLS}},
	)
	pc := emptyPath()
	require.NoError(t, addZtunnel(&pc, "cluster-1", "fortio-client", networks, strings.NewReader(client)))
	require.NoError(t, addZtunnel(&pc, "cluster-2", "fortio-client", networks, strings.NewReader(remote)))
	assert.Equal(t, int64(40), pc.ClientHBONE)
	assert.Equal(t, int64(25), pc.ClientDoubleHBONE)
	assert.Equal(t, map[string]int64{"cluster-1/echo-local": 40, "cluster-2/echo-remote": 25, "cluster-2/echo-failover": 3}, pc.Served)
	assert.Equal(t, map[string]int64{"cluster-1": 40, "cluster-2": 28}, pc.Inbound)
	assert.Equal(t, map[string]int64{"cluster-2": 25}, pc.InboundViaGateway)
}

// gatewayCounters are counters of an east-west gateway's Envoy, by Envoy's stat names: the
// tunnels its HBONE listener terminated, the 2xx answers among them, its admin listener's
// requests and one of the cluster manager's.
var gatewayCounters = map[string]uint64{
	realfmt.ConnectTerminateRequests:           25,
	"http.connect_terminate.downstream_rq_2xx": 24,
	"http.admin.downstream_rq_total":           4,
	"cluster_manager.cds.update_success":       3,
}

// The east-west gateway's /stats/prometheus as its Envoy writes it with the bootstrap pilot-agent
// renders (Istio's template and pkg/bootstrap, for the gateway's pod: realfmt/eastwest).
//
// As installed, the pod does not ask for http.* stats, so Istio's bootstrap leaves the tunnel
// counter out altogether: the reader says so rather than read 0 tunnels. Asked for them
// (sidecar.istio.io/statsInclusionPrefixes), Envoy has the counter under the stat's whole name:
// Istio's tag extractor takes no prefix without a ";" after it, as connect_terminate has none.
func TestGatewayTunnelsFromIstiosEnvoy(t *testing.T) {
	t.Run("AsInstalled", func(t *testing.T) {
		stats, err := eastwest.Stats(nil)
		require.NoError(t, err)
		in, err := stats.Instantiated(realfmt.ConnectTerminateRequests)
		require.NoError(t, err)
		require.False(t, in, "Istio's bootstrap creates http.* stats only on request")
		text, err := stats.PrometheusCounters(gatewayCounters)
		require.NoError(t, err)
		require.Contains(t, text, "envoy_cluster_manager_cds_update_success{} 3\n", "the stats Istio keeps")
		pc := emptyPath()
		err = addGateway(&pc, "cluster-2", strings.NewReader(text))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "annotate the gateway's pod sidecar.istio.io/statsInclusionPrefixes: http.connect_terminate")
	})
	t.Run("AskedForTheStat", func(t *testing.T) {
		stats, err := eastwest.Stats(map[string]string{realfmt.EnvoyStatsInclusionAnnotation: "http." + realfmt.ConnectTerminateStatPrefix})
		require.NoError(t, err)
		text, err := stats.PrometheusCounters(gatewayCounters)
		require.NoError(t, err)
		require.Contains(t, text, "\nenvoy_http_connect_terminate_downstream_rq_total{} 25\n")
		require.Contains(t, text, "\nenvoy_http_connect_terminate_downstream_rq{response_code_class=\"2xx\"} 24\n")
		require.NotContains(t, text, "admin")
		pc := emptyPath()
		require.NoError(t, addGateway(&pc, "cluster-2", strings.NewReader(text)))
		assert.Equal(t, map[string]int64{"cluster-2": 25}, pc.GatewayTunnels, "the tunnels, not the 2xx answers")
	})
}
