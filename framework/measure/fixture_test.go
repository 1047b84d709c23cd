package measure

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hand-written fixtures in the Prometheus text format, shaped like istiod's /metrics: the
// client_golang process and Go collectors' names and HELP texts, and istiod's own metrics with the
// names and labels of pkg/kube/multicluster/secretcontroller.go and pilot/pkg/xds/monitoring.go
// (exported through otel without counter suffixes, hence pilot_xds_pushes without _total).
// TestScrapeParsesIstioMonitoringExporter checks the same names against the real exporter.

// fixtureJoined: cluster-2 synced, cluster-3 still syncing, cluster-4 joined earlier and was
// deleted (istiod zeroes its series but keeps them).
var fixtureJoined = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 1894
# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.6612344e+08
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 2.31481344e+08
# HELP istiod_managed_clusters Number of clusters managed by istiod
# TYPE istiod_managed_clusters gauge
istiod_managed_clusters{cluster_type="local"} 1
istiod_managed_clusters{cluster_type="remote"} 2
# HELP istiod_remote_cluster_sync_status Current synchronization state of remote clusters managed by istiod. One sample per cluster and state; a value of 1 indicates the cluster is in that state.
# TYPE istiod_remote_cluster_sync_status gauge
` + syncStatus("cluster-2", "synced") + syncStatus("cluster-3", "syncing") + syncStatus("cluster-4", "") +
	`# HELP pilot_xds Number of endpoints connected to this pilot using XDS.
# TYPE pilot_xds gauge
pilot_xds{version="1.30-dev"} 2
pilot_xds{version="unknown"} 1
# HELP pilot_xds_push_time Total time in seconds Pilot takes to push lds, rds, cds and eds.
# TYPE pilot_xds_push_time histogram
pilot_xds_push_time_bucket{type="wds",le="0.01"} 9
pilot_xds_push_time_bucket{type="wds",le="0.1"} 12
pilot_xds_push_time_bucket{type="wds",le="+Inf"} 12
pilot_xds_push_time_sum{type="wds"} 0.214
pilot_xds_push_time_count{type="wds"} 12
# HELP pilot_xds_pushes Pilot build and send errors for lds, rds, cds and eds.
# TYPE pilot_xds_pushes counter
pilot_xds_pushes{type="cds"} 3
pilot_xds_pushes{type="eds"} 5
pilot_xds_pushes{type="eds_senderr"} 2
pilot_xds_pushes{type="wads"} 4
pilot_xds_pushes{type="wds"} 12
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 37.42
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 5.00244224e+08
# HELP remote_cluster_secret_events_total Number of remote cluster secret events.
# TYPE remote_cluster_secret_events_total counter
remote_cluster_secret_events_total{event="add"} 3
remote_cluster_secret_events_total{event="delete"} 1
# HELP remote_cluster_sync_timeouts_total Number of times remote clusters took too long to sync, causing slow startup that excludes remote clusters.
# TYPE remote_cluster_sync_timeouts_total counter
remote_cluster_sync_timeouts_total{cluster="cluster-3"} 1
`

// fixtureProcessFormat is the process/Go part with the values a test varies (CPU seconds, RSS,
// heap in use); the istiod part is appended.
const fixtureProcessFormat = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 412
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes %g
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total %g
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes %g
`

// Remote-cluster states of cluster-2 over a join and a leave, in istiod's order.
var (
	fixtureBeforeJoin = managedClusters(0)
	fixtureSyncing    = managedClusters(1) + syncStatusHeader + syncStatus("cluster-2", "syncing")
	fixtureSynced     = managedClusters(1) + syncStatusHeader + syncStatus("cluster-2", "synced")
	// fixtureClosing: Stop() has set "closed", handlers are still being removed.
	fixtureClosing = managedClusters(1) + syncStatusHeader + syncStatus("cluster-2", "closed")
	// fixtureGone: istiod zeroes a deleted cluster's series but keeps them.
	fixtureGone = managedClusters(0) + syncStatusHeader + syncStatus("cluster-2", "")
)

// managedClusters is istiod's istiod_managed_clusters gauge: the local cluster and the given
// number of remote ones.
func managedClusters(remotes int) string {
	return fmt.Sprintf(`# HELP istiod_managed_clusters Number of clusters managed by istiod
# TYPE istiod_managed_clusters gauge
istiod_managed_clusters{cluster_type="local"} 1
istiod_managed_clusters{cluster_type="remote"} %d
`, remotes)
}

// syncStatusHeader opens the sync-status series of the states above.
const syncStatusHeader = `# HELP istiod_remote_cluster_sync_status Current synchronization state of remote clusters managed by istiod.
# TYPE istiod_remote_cluster_sync_status gauge
`

// syncStatus is a remote cluster's istiod_remote_cluster_sync_status series: 1 for state, 0 for
// the other states (all 0 when state is "").
func syncStatus(cluster, state string) string {
	var b strings.Builder
	for _, s := range []string{"closed", "synced", "syncing", "timeout"} {
		v := 0
		if s == state {
			v = 1
		}
		fmt.Fprintf(&b, "istiod_remote_cluster_sync_status{cluster=%q,cluster_type=\"remote\",status=%q} %d\n", cluster, s, v)
	}
	return b.String()
}

// exposition is a full scrape body: the process part with the given values plus an istiod part.
func exposition(cpuSeconds, rssBytes, heapInuseBytes float64, istiodPart string) string {
	return fmt.Sprintf(fixtureProcessFormat, heapInuseBytes, cpuSeconds, rssBytes) + istiodPart
}

// textContentType is what promhttp sends for the classic text format.
const textContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

func serveText(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", textContentType)
	_, _ = fmt.Fprint(w, body)
}

// loopbackServer starts an httptest server bound to 127.0.0.1 explicitly.
func loopbackServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := httptest.NewUnstartedServer(h)
	_ = s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// debugServer stands in for istiod's debug port: it serves *body (as the test holds it at the time
// of the request) at path and 404 elsewhere.
func debugServer(t *testing.T, path string, body *string) (*Sampler, *httptest.Server) {
	t.Helper()
	srv := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(*body))
	}))
	return &Sampler{Name: "c1", DebugURL: srv.URL}, srv
}
