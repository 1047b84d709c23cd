package measure

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"istio.io/istio/pkg/monitoring"
)

func TestScrapeParsesIstiodExposition(t *testing.T) {
	var accept string
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		serveText(w, fixtureJoined)
	}))
	i := &Sampler{Name: "cluster-1", MetricsURL: srv.URL + "/metrics"}

	before := time.Now()
	m, err := i.Scrape(context.Background())
	after := time.Now()
	require.NoError(t, err)

	assert.Contains(t, accept, "text/plain")
	assert.False(t, m.At.Before(before) || m.At.After(after), "At %v outside the request [%v, %v]", m.At, before, after)
	assert.Equal(t, 37.42, m.CPUSecondsTotal)
	assert.Equal(t, 5.00244224e+08, m.ResidentMemoryBytes)
	assert.Equal(t, 2.31481344e+08, m.HeapInuseBytes)
	assert.Equal(t, 1894.0, m.Goroutines)
	assert.Equal(t, map[string]float64{"local": 1, "remote": 2}, m.ManagedClusters)
	assert.Equal(t, map[string]bool{"cluster-2": true, "cluster-3": false, "cluster-4": false}, m.RemoteSync)
	assert.Equal(t, map[string]string{"cluster-2": StatusSynced, "cluster-3": StatusSyncing, "cluster-4": ""}, m.RemoteStatus)
	assert.Equal(t, []string{"cluster-2", "cluster-3"}, m.RemoteClusters())
	// cds 3 + eds 5 + wads 4 + wds 12; eds_senderr counts failures, not pushes.
	require.NotNil(t, m.XDSPushes)
	require.NotNil(t, m.XDSPushErrors)
	require.NotNil(t, m.ConnectedXDS)
	assert.Equal(t, 24.0, *m.XDSPushes)
	assert.Equal(t, 2.0, *m.XDSPushErrors)
	assert.Equal(t, 3.0, *m.ConnectedXDS)
	require.Contains(t, m.Families, "pilot_xds_push_time")
	assert.Equal(t, uint64(12), m.Families["pilot_xds_push_time"].GetMetric()[0].GetHistogram().GetSampleCount())
}

func TestParseMetricsRejectsExpositionWithoutProcessMetrics(t *testing.T) {
	body := strings.Replace(fixtureJoined, "process_cpu_seconds_total 37.42\n", "", 1)
	body = strings.Replace(body, "go_goroutines 1894\n", "", 1)
	_, err := ParseMetrics(strings.NewReader(body), time.Now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "process_cpu_seconds_total")
	assert.Contains(t, err.Error(), "go_goroutines")
}

// An istiod that exports no xDS metrics has no push count and no connected clients: absent, not 0.
func TestParseMetricsLeavesAbsentXDSMetricsNil(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition(1, 2, 3, fixtureSynced)), time.Now())
	require.NoError(t, err)
	assert.Nil(t, m.XDSPushes)
	assert.Nil(t, m.XDSPushErrors)
	assert.Nil(t, m.ConnectedXDS)
}

// deref reads a counter that may not have existed yet (the first scrape of a fresh exporter).
func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func TestParseMetricsRejectsTwoSyncStatesAtOnce(t *testing.T) {
	body := exposition(1, 2, 3, strings.Replace(fixtureSynced,
		`status="syncing"} 0`, `status="syncing"} 1`, 1))
	_, err := ParseMetrics(strings.NewReader(body), time.Now())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster-2")
}

func TestParseMetricsRejectsMalformedText(t *testing.T) {
	_, err := ParseMetrics(strings.NewReader(fixtureJoined+"process_cpu_seconds_total{ 1\n"), time.Now())
	require.Error(t, err)
}

func TestScrapeErrorsNameIstiodAndCause(t *testing.T) {
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		case "/protobuf":
			w.Header().Set("Content-Type", "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited")
			_, _ = w.Write([]byte{0x01, 0x02})
		}
	}))
	for path, want := range map[string]string{"/down": "503", "/protobuf": "application/vnd.google.protobuf"} {
		i := &Sampler{Name: "cluster-7", MetricsURL: srv.URL + path}
		_, err := i.Scrape(context.Background())
		require.Error(t, err, path)
		assert.Contains(t, err.Error(), "istiod cluster-7", path)
		assert.Contains(t, err.Error(), want, path)
	}
}

// exporterMetrics mirrors istiod's package-level metric variables: Istio's monitoring package
// refuses (log.Fatal) to define a metric once an exporter is registered, so they must exist first.
var exporterMetrics = struct {
	cluster, status, clusterType, typ, version monitoring.Label
	managed, syncState, pushes, clients        monitoring.Metric
}{
	cluster:     monitoring.CreateLabel(LabelCluster),
	status:      monitoring.CreateLabel(LabelStatus),
	clusterType: monitoring.CreateLabel(LabelClusterType),
	typ:         monitoring.CreateLabel(LabelType),
	version:     monitoring.CreateLabel("version"),
	managed:     monitoring.NewGauge(MetricManagedClusters, "Number of clusters managed by istiod"),
	syncState:   monitoring.NewGauge(MetricRemoteSync, "Current synchronization state of remote clusters managed by istiod."),
	pushes:      monitoring.NewSum(MetricXDSPushes, "Pilot build and send errors for lds, rds, cds and eds."),
	clients:     monitoring.NewGauge(MetricXDSClients, "Number of endpoints connected to this pilot using XDS."),
}

var (
	exporterOnce    sync.Once
	exporterHandler http.Handler
	exporterErr     error
)

// TestScrapeParsesIstioMonitoringExporter serves metrics through Istio's own exporter
// (pkg/monitoring, registered as istiod's bootstrap does: on the default Prometheus registry,
// which carries client_golang's process and Go collectors). The istiod-specific metrics are
// recreated here with the names and labels of secretcontroller.go and xds/monitoring.go; what this
// proves is the otel-to-Prometheus rendering (no _total added to sums, no scope labels) and the
// collectors' metric names, i.e. what a real istiod's /metrics looks like to the parser.
func TestScrapeParsesIstioMonitoringExporter(t *testing.T) {
	// Register once per process: -count=N reruns the test, and sums live on across runs.
	exporterOnce.Do(func() { exporterHandler, exporterErr = monitoring.RegisterPrometheusExporter(nil, nil) })
	require.NoError(t, exporterErr)
	srv := loopbackServer(t, exporterHandler)
	i := &Sampler{Name: "exporter", MetricsURL: srv.URL}
	m0, err := i.Scrape(context.Background())
	require.NoError(t, err)

	exp := exporterMetrics
	exp.managed.With(exp.clusterType.Value("local")).Record(1)
	exp.managed.With(exp.clusterType.Value("remote")).Record(1)
	for _, s := range []string{StatusSynced, StatusSyncing, StatusTimeout, StatusClosed} {
		v := 0.0
		if s == StatusSynced {
			v = 1
		}
		exp.syncState.With(exp.cluster.Value("cluster-2"), exp.clusterType.Value("remote"), exp.status.Value(s)).Record(v)
	}
	exp.pushes.With(exp.typ.Value("wds")).Increment()
	exp.pushes.With(exp.typ.Value("wds")).Increment()
	exp.pushes.With(exp.typ.Value("eds_senderr")).Increment()
	exp.clients.With(exp.version.Value("1.30-dev")).Record(1)

	m, err := i.Scrape(context.Background())
	require.NoError(t, err)

	assert.Greater(t, m.CPUSecondsTotal, 0.0)
	assert.Greater(t, m.ResidentMemoryBytes, 1e6)
	assert.Greater(t, m.HeapInuseBytes, 0.0)
	assert.Greater(t, m.Goroutines, 0.0)
	assert.Equal(t, map[string]float64{"local": 1, "remote": 1}, m.ManagedClusters)
	assert.Equal(t, map[string]bool{"cluster-2": true}, m.RemoteSync)
	assert.Equal(t, map[string]string{"cluster-2": StatusSynced}, m.RemoteStatus)
	require.NotNil(t, m.XDSPushes)
	require.NotNil(t, m.XDSPushErrors)
	require.NotNil(t, m.ConnectedXDS)
	assert.Equal(t, 2.0, *m.XDSPushes-deref(m0.XDSPushes))
	assert.Equal(t, 1.0, *m.XDSPushErrors-deref(m0.XDSPushErrors))
	assert.Equal(t, 1.0, *m.ConnectedXDS)
	assert.NotContains(t, m.Families, MetricXDSPushes+"_total", "istiod exports sums without the _total suffix")
}
