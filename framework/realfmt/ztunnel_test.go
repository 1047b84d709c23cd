package realfmt

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A dump of one workload and one service, spelled as ztunnel spells them.
const oneOfEach = `{
  "workloads": [{"workloadIps": ["10.0.0.1"], "protocol": "HBONE", "networkMode": "Standard", "uid": "c//Pod/ns/a", "name": "a",
    "namespace": "ns", "status": "Healthy", "clusterId": "c", "capacity": 1,
    "networkGateway": {"destination": "n/1.2.3.4", "hboneMtlsPort": 15008}}],
  "services": [{"name": "s", "namespace": "ns", "hostname": "s.ns.svc.cluster.local", "vips": [], "ports": {"80": 8080},
    "endpoints": {"c//Pod/ns/a": {"workloadUid": "c//Pod/ns/a", "port": {"80": 8080}, "status": "Healthy"}},
    "subjectAltNames": [], "canonical": true, "visibility": "Public"}],
  "policies": [], "stagedServices": {}, "certificates": []
}`

func TestCheckZtunnelDump(t *testing.T) {
	require.NoError(t, CheckZtunnelDump([]byte(oneOfEach)))
	for name, c := range map[string]struct{ from, to, want string }{
		"a misspelled key":           {`"clusterId"`, `"clusterID"`, `workloads[0]: key "clusterID" is not one ztunnel writes`},
		"a snake_case key":           {`"workloadUid"`, `"workload_uid"`, `key "workload_uid" is not one ztunnel writes`},
		"istioctl's endpoint key":    {`"status": "Healthy"}}`, `"status": "Healthy", "service": "ns/s"}}`, `key "service" is not one ztunnel writes`},
		"a missing key":              {`"capacity": 1,`, ``, `workloads[0]: lacks "capacity", which ztunnel always writes (src/state/workload.rs:292)`},
		"a value ztunnel never uses": {`"visibility": "Public"`, `"visibility": "ClusterIP"`, `"ClusterIP" is not one of ztunnel's`},
		"the xDS protocol name":      {`"protocol": "HBONE"`, `"protocol": "NONE"`, `"NONE" is not one of ztunnel's`},
		"a gateway without its port": {`, "hboneMtlsPort": 15008`, ``, `networkGateway: lacks "hboneMtlsPort"`},
	} {
		t.Run(name, func(t *testing.T) {
			data := strings.Replace(oneOfEach, c.from, c.to, 1)
			require.NotEqual(t, oneOfEach, data)
			assert.ErrorContains(t, CheckZtunnelDump([]byte(data)), c.want)
		})
	}
}

// The counter text parses as Prometheus parses ztunnel's scrape: a family named with _total,
// every label of CommonTrafficLabels in ztunnel's order, unset ones "unknown".
func TestZtunnelConnectionsOpenedText(t *testing.T) {
	text, err := ZtunnelConnectionsOpenedText(
		ZtunnelSeries{Labels: map[string]string{"reporter": "destination", "destination_workload": "echo"}, Value: 3},
		ZtunnelSeries{Labels: map[string]string{"source_workload": "client", "destination_region": "eu"}, Value: 5},
	)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(text, "# HELP istio_tcp_connections_opened The total number of TCP connections opened.\n# TYPE istio_tcp_connections_opened counter\n"))
	assert.Contains(t, text, `istio_tcp_connections_opened_total{reporter="destination",source_workload="unknown",`)
	fams, err := textParser().TextToMetricFamilies(strings.NewReader(ZtunnelExposition(text, ZtunnelBuildText("1.31.0"))))
	require.NoError(t, err)
	f := fams[ZtunnelConnectionsOpened]
	require.NotNil(t, f)
	require.Len(t, f.GetMetric(), 2)
	assert.Len(t, f.GetMetric()[0].GetLabel(), len(ZtunnelTrafficLabels))
	assert.Len(t, f.GetMetric()[1].GetLabel(), len(ZtunnelTrafficLabels)+len(ZtunnelLocalityLabels), "a locality label brings all four")
	assert.NotNil(t, fams["istio_build"])

	_, err = ZtunnelConnectionsOpenedText(ZtunnelSeries{Labels: map[string]string{"destination_cluster_id": "c"}})
	assert.ErrorContains(t, err, `ztunnel writes no label "destination_cluster_id"`)
}

// textParser is Prometheus's text parser, addressable (its method has a pointer receiver).
func textParser() *expfmt.TextParser {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return &p
}
