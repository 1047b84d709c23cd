package inpod

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/realfmt"
)

// The emulator's /metrics carry ztunnel's sample name, label names and label values
// (realfmt cites them in istio/ztunnel's src/proxy/metrics.rs): a subset of ztunnel's labels,
// each spelled as ztunnel spells it.
func TestMetricsUseZtunnelsNames(t *testing.T) {
	m := NewMetrics()
	m.Opened(Connection{Reporter: realfmt.ZtunnelReporterSource, SourceWorkload: "fortio-client", SourceNamespace: "probe", SourceCluster: "cluster-1",
		DestinationService: "echo.probe.svc.cluster.local", DestinationWorkload: "echo", DestinationNamespace: "probe", DestinationCluster: "cluster-2", MutualTLS: true})
	m.Opened(Connection{Reporter: realfmt.ZtunnelReporterDestination, DestinationWorkload: "echo", DestinationNamespace: "probe", DestinationCluster: "cluster-2"})

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, realfmt.ZtunnelMetricsPath, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	fams, err := textParser().TextToMetricFamilies(rec.Body)
	require.NoError(t, err)
	f := fams[realfmt.ZtunnelConnectionsOpened]
	require.NotNil(t, f, "the sample name ztunnel writes")
	require.Len(t, f.GetMetric(), 2)
	values := map[string]map[string]string{}
	for _, s := range f.GetMetric() {
		l := map[string]string{}
		for _, p := range s.GetLabel() {
			assert.True(t, slices.Contains(realfmt.ZtunnelTrafficLabels, p.GetName()), "label %s is not one ztunnel writes", p.GetName())
			l[p.GetName()] = p.GetValue()
		}
		values[l["reporter"]] = l
	}
	src, dst := values[realfmt.ZtunnelReporterSource], values[realfmt.ZtunnelReporterDestination]
	require.NotNil(t, src)
	require.NotNil(t, dst)
	assert.Equal(t, realfmt.ZtunnelMutualTLS, src["connection_security_policy"])
	assert.Equal(t, realfmt.ZtunnelTCP, src["request_protocol"])
	assert.Equal(t, realfmt.ZtunnelUnknown, dst["source_workload"], "an unknown peer, as ztunnel labels one")
	assert.Equal(t, realfmt.ZtunnelUnknown, dst["connection_security_policy"], "plaintext: SecurityPolicy's default")
}

// textParser is Prometheus's text parser, addressable (its method has a pointer receiver).
func textParser() *expfmt.TextParser {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return &p
}
