package incluster

import (
	"strings"
	"testing"

	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Series as ztunnel writes them (src/proxy/metrics.rs CommonTrafficLabels, label order kept;
// locality labels left out), for a client ztunnel in cluster-1 and an echo ztunnel in cluster-2.
const clientZtunnel = `# HELP istio_tcp_connections_opened The total number of TCP connections opened.
# TYPE istio_tcp_connections_opened counter
istio_tcp_connections_opened_total{reporter="source",source_workload="fortio-client",source_canonical_service="fortio-client",source_canonical_revision="latest",source_workload_namespace="probe",source_principal="spiffe://cluster.local/ns/probe/sa/client",source_app="fortio-client",source_version="latest",source_cluster="cluster-1",destination_service="echo-local.probe.svc.cluster.local",destination_service_namespace="probe",destination_service_name="echo-local",destination_workload="echo-local",destination_canonical_service="echo-local",destination_canonical_revision="latest",destination_workload_namespace="probe",destination_principal="spiffe://cluster.local/ns/probe/sa/echo",destination_app="echo-local",destination_version="latest",destination_cluster="cluster-1",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls"} 40
istio_tcp_connections_opened_total{reporter="source",source_workload="fortio-client",source_canonical_service="fortio-client",source_canonical_revision="latest",source_workload_namespace="probe",source_principal="spiffe://cluster.local/ns/probe/sa/client",source_app="fortio-client",source_version="latest",source_cluster="cluster-1",destination_service="echo-remote.probe.svc.cluster.local",destination_service_namespace="probe",destination_service_name="echo-remote",destination_workload="echo-remote",destination_canonical_service="echo-remote",destination_canonical_revision="latest",destination_workload_namespace="probe",destination_principal="spiffe://cluster.local/ns/probe/sa/echo",destination_app="echo-remote",destination_version="latest",destination_cluster="cluster-2",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls"} 25
istio_tcp_connections_opened_total{reporter="source",source_workload="prometheus",source_canonical_service="prometheus",source_canonical_revision="latest",source_workload_namespace="monitoring",source_principal="unknown",source_app="prometheus",source_version="latest",source_cluster="cluster-1",destination_service="unknown",destination_service_namespace="unknown",destination_service_name="unknown",destination_workload="echo-local",destination_canonical_service="unknown",destination_canonical_revision="unknown",destination_workload_namespace="probe",destination_principal="unknown",destination_app="unknown",destination_version="unknown",destination_cluster="cluster-1",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls"} 7
istio_tcp_connections_opened_total{reporter="destination",source_workload="fortio-client",source_canonical_service="fortio-client",source_canonical_revision="latest",source_workload_namespace="probe",source_principal="spiffe://cluster.local/ns/probe/sa/client",source_app="fortio-client",source_version="latest",source_cluster="cluster-1",destination_service="echo-local.probe.svc.cluster.local",destination_service_namespace="probe",destination_service_name="echo-local",destination_workload="echo-local",destination_canonical_service="echo-local",destination_canonical_revision="latest",destination_workload_namespace="probe",destination_principal="spiffe://cluster.local/ns/probe/sa/echo",destination_app="echo-local",destination_version="latest",destination_cluster="cluster-1",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls"} 40
istio_tcp_connections_opened_total{reporter="destination",source_workload="kubelet",source_canonical_service="unknown",source_canonical_revision="unknown",source_workload_namespace="unknown",source_principal="unknown",source_app="unknown",source_version="unknown",source_cluster="unknown",destination_service="unknown",destination_service_namespace="unknown",destination_service_name="unknown",destination_workload="coredns",destination_canonical_service="coredns",destination_canonical_revision="latest",destination_workload_namespace="kube-system",destination_principal="unknown",destination_app="coredns",destination_version="latest",destination_cluster="cluster-1",request_protocol="tcp",response_flags="-",connection_security_policy="unknown"} 99
# HELP istio_tcp_sent_bytes The size of total bytes sent during response in case of a TCP connection.
# TYPE istio_tcp_sent_bytes counter
istio_tcp_sent_bytes_total{reporter="source",source_workload="fortio-client",destination_cluster="cluster-1"} 123456
`

// OpenMetrics ends with # EOF, which ztunnel's encoder writes.
const remoteZtunnel = `# TYPE istio_tcp_connections_opened counter
istio_tcp_connections_opened_total{reporter="destination",source_workload="fortio-client",source_workload_namespace="probe",source_cluster="cluster-1",destination_workload="echo-remote",destination_workload_namespace="probe",destination_cluster="cluster-2",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls"} 25
istio_tcp_connections_opened_total{reporter="destination",source_workload="fortio-client",source_workload_namespace="probe",source_cluster="cluster-2",destination_workload="echo-failover",destination_workload_namespace="probe",destination_cluster="cluster-2",request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls"} 3
# EOF
`

// Envoy's Prometheus stats of the east-west gateway whose pod asked for http.connect_terminate
// stats: the stat's whole name, no tag taken off (Istio's bootstrap extracts
// http_conn_manager_prefix only before a ";"), written "name{} value" as Envoy writes a counter
// without tags (realfmt cites the sources; TestGatewayTunnelsFromIstiosEnvoy derives the same
// from Istio's bootstrap).
const gatewayStats = `# TYPE envoy_cluster_manager_cds_update_success counter
envoy_cluster_manager_cds_update_success{} 3
# TYPE envoy_http_connect_terminate_downstream_rq counter
envoy_http_connect_terminate_downstream_rq{response_code_class="2xx"} 24
# TYPE envoy_http_connect_terminate_downstream_rq_total counter
envoy_http_connect_terminate_downstream_rq_total{} 25
`

// idleGatewayStats is a gateway that asked for the stat and carried nothing yet: Envoy writes a
// counter it created even at 0.
const idleGatewayStats = `# TYPE envoy_http_connect_terminate_downstream_rq_total counter
envoy_http_connect_terminate_downstream_rq_total{} 0
`

func emptyPath() probe.PathCounters {
	return probe.PathCounters{Served: map[string]int64{}, GatewayTunnels: map[string]int64{},
		Inbound: map[string]int64{}, InboundViaGateway: map[string]int64{}}
}

// networks: cluster-1 and cluster-3 share network-1, cluster-2 is on network-2.
func networks(c string) string {
	return map[string]string{"cluster-1": "network-1", "cluster-2": "network-2", "cluster-3": "network-1"}[c]
}

func TestPathCountersFromZtunnelAndGatewayMetrics(t *testing.T) {
	pc := emptyPath()
	require.NoError(t, addZtunnel(&pc, "cluster-1", "fortio-client", networks, strings.NewReader(clientZtunnel)))
	require.NoError(t, addZtunnel(&pc, "cluster-2", "fortio-client", networks, strings.NewReader(remoteZtunnel)))
	require.NoError(t, addGateway(&pc, "cluster-2", strings.NewReader(gatewayStats)))
	require.NoError(t, addGateway(&pc, "cluster-1", strings.NewReader(idleGatewayStats)))

	assert.Equal(t, int64(40), pc.ClientHBONE, "client connections to its own cluster: one HBONE hop")
	assert.Equal(t, int64(25), pc.ClientDoubleHBONE, "client connections to another cluster: double HBONE; other sources ignored")
	assert.Equal(t, map[string]int64{"cluster-1/echo-local": 40, "cluster-2/echo-remote": 25, "cluster-2/echo-failover": 3}, pc.Served,
		"inbound connections per endpoint; traffic outside the probe namespace ignored")
	assert.Equal(t, map[string]int64{"cluster-1": 40, "cluster-2": 28}, pc.Inbound)
	assert.Equal(t, map[string]int64{"cluster-2": 25}, pc.InboundViaGateway, "only what came from another cluster")
	assert.Equal(t, map[string]int64{"cluster-1": 0, "cluster-2": 25}, pc.GatewayTunnels, "CONNECT requests on connect_terminate")
}

// A peer cluster on the client's network is one HBONE hop, not through a gateway, at both ends.
func TestPathCountersPeerOnTheSameNetwork(t *testing.T) {
	pc := emptyPath()
	peer := strings.ReplaceAll(clientZtunnel, `destination_cluster="cluster-2"`, `destination_cluster="cluster-3"`)
	require.NoError(t, addZtunnel(&pc, "cluster-1", "fortio-client", networks, strings.NewReader(peer)))
	assert.Equal(t, int64(65), pc.ClientHBONE)
	assert.Zero(t, pc.ClientDoubleHBONE)
	inbound := strings.ReplaceAll(remoteZtunnel, `destination_cluster="cluster-2"`, `destination_cluster="cluster-3"`)
	require.NoError(t, addZtunnel(&pc, "cluster-3", "fortio-client", networks, strings.NewReader(inbound)))
	assert.Equal(t, int64(3), pc.InboundViaGateway["cluster-3"], "the 25 from cluster-1 on the same network came straight; the 3 from cluster-2's network through a gateway")
	assert.Equal(t, int64(28), pc.Inbound["cluster-3"])
}

// An Envoy whose tag extractor takes the connection manager's prefix off (a bootstrap with Envoy's
// default tags) writes the counter with an http_conn_manager_prefix label: read as well, only
// for connect_terminate. A gateway with neither spelling is an error, not 0 tunnels.
func TestGatewayTunnelsOtherSpellingAndAbsence(t *testing.T) {
	pc := emptyPath()
	require.NoError(t, addGateway(&pc, "cluster-2", strings.NewReader(`# TYPE envoy_http_downstream_rq_total counter
envoy_http_downstream_rq_total{http_conn_manager_prefix="connect_terminate"} 25
envoy_http_downstream_rq_total{http_conn_manager_prefix="admin"} 4
`)))
	assert.Equal(t, int64(25), pc.GatewayTunnels["cluster-2"])

	for name, stats := range map[string]string{
		"Empty":             "",
		"OtherManagersOnly": "# TYPE envoy_http_downstream_rq_total counter\nenvoy_http_downstream_rq_total{http_conn_manager_prefix=\"admin\"} 4\n",
	} {
		t.Run(name, func(t *testing.T) {
			pc := emptyPath()
			err := addGateway(&pc, "cluster-2", strings.NewReader(stats))
			require.ErrorContains(t, err, "no envoy_http_connect_terminate_downstream_rq_total")
			assert.NotContains(t, pc.GatewayTunnels, "cluster-2")
		})
	}
}

func TestPathCountersRejectBadMetrics(t *testing.T) {
	pc := emptyPath()
	err := addZtunnel(&pc, "cluster-1", "fortio-client", networks, strings.NewReader("istio_tcp_connections_opened_total{reporter=\"source\" 1\n"))
	require.ErrorContains(t, err, "ztunnel metrics")
	err = addGateway(&pc, "cluster-1", strings.NewReader("garbage{\n"))
	require.ErrorContains(t, err, "east-west gateway stats")
}
