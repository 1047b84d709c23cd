// Package measure holds the sensors of one istiod (pilot-discovery) process, read over loopback
// through its Sampler: its metrics, CPU and memory, and polls until istiod reports a remote
// cluster's sync status; framework/join decides when a join or leave has converged. It reads
// istiod's Prometheus endpoint (the monitoring port), its ControlZ endpoint (the ctrlz port) and,
// on the HTTP debug port, /debug/krtz, /debug/adsz (the connected xDS clients) and /debug/pprof,
// and nothing else.
//
// Metric and label names are those of istio.io/istio@v0.0.0-20260827124520-eed52ebb66ad:
//   - process_cpu_seconds_total, process_resident_memory_bytes, go_memstats_heap_inuse_bytes,
//     go_goroutines: client_golang's process and Go collectors on the default registry, which
//     istiod's exporter gathers (pkg/monitoring/monitoring.go RegisterPrometheusExporter).
//   - istiod_managed_clusters{cluster_type="local"|"remote"} and
//     istiod_remote_cluster_sync_status{cluster, cluster_type="remote", status="synced"|"syncing"|
//     "timeout"|"closed"}: pkg/kube/multicluster/secretcontroller.go. Exactly one status of a
//     managed cluster is 1; deleting the cluster sets all four to 0 (the series stay).
//   - pilot_xds{version} (connected xDS clients per proxy version) and pilot_xds_pushes{type}
//     (successful pushes per xDS type; "<x>ds_senderr" types count send errors):
//     pilot/pkg/xds/monitoring.go. istiod exports with otel's WithoutCounterSuffixes, so the
//     counter really is named pilot_xds_pushes, without _total.
package measure

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric and label names, exactly as istiod exports them (see the package comment for sources).
const (
	MetricCPUSeconds      = "process_cpu_seconds_total"
	MetricRSS             = "process_resident_memory_bytes"
	MetricHeapInuse       = "go_memstats_heap_inuse_bytes"
	MetricGoroutines      = "go_goroutines"
	MetricManagedClusters = "istiod_managed_clusters"
	MetricRemoteSync      = "istiod_remote_cluster_sync_status"
	MetricXDSPushes       = "pilot_xds_pushes"
	MetricXDSClients      = "pilot_xds"
	// istiod's CA server (security/pkg/server/ca/monitoring.go): CSRs received, and certificates
	// signed for them.
	MetricCSRs        = "citadel_server_csr_count"
	MetricCertsIssued = "citadel_server_success_cert_issuance_count"

	LabelCluster     = "cluster"
	LabelClusterType = "cluster_type"
	LabelStatus      = "status"
	LabelType        = "type"

	// Values of istiod_remote_cluster_sync_status's status label
	// (pkg/kube/multicluster/cluster.go SyncStatus*).
	StatusSynced  = "synced"
	StatusSyncing = "syncing"
	StatusTimeout = "timeout"
	StatusClosed  = "closed"
)

// requiredMetrics must be in every scrape: without them a CPU or memory figure would silently be
// zero, so a scrape lacking one is an error rather than a sample.
var requiredMetrics = []string{MetricCPUSeconds, MetricRSS, MetricHeapInuse, MetricGoroutines}

// Sampler reads one istiod: its metrics, ControlZ, debug handlers and CPU. All URLs are expected
// on 127.0.0.1. The framework pairs each istiod with one (mesh.Istiod).
type Sampler struct {
	// Name identifies the istiod in errors (e.g. its cluster name).
	Name string
	// MetricsURL is the Prometheus endpoint on the monitoring port: http://127.0.0.1:P/metrics.
	MetricsURL string
	// CtrlzURL is the ControlZ base URL on the ctrlz port: http://127.0.0.1:P (no trailing path).
	CtrlzURL string
	// DebugURL is the base of istiod's /debug endpoints (the HTTP port, which answers loopback
	// callers without authentication): http://127.0.0.1:P. Empty where the provider cannot reach it.
	DebugURL string
	// Client is used for every request; nil means a private client with a 10 s timeout and no
	// proxy.
	Client *http.Client
	// CPU reads istiod's CPU time finer than process_cpu_seconds_total's 10 ms (e.g. Schedstat
	// for a local process); nil means that metric (MetricCPU).
	CPU CPUSource

	// MemoryCgroup is the directory of the memory cgroup holding istiod alone, nil or "" where
	// there is none: Settled then reads no working set.
	MemoryCgroup func() string

	// onScrape receives every successful scrape (the run's metrics timeline); see OnScrape.
	onScrape atomic.Pointer[func(*Metrics)]
}

// OnScrape hands every later successful scrape to f, which must be safe for concurrent calls
// (waits and samplers scrape at once).
func (i *Sampler) OnScrape(f func(*Metrics)) { i.onScrape.Store(&f) }

// defaultClient never consults proxy variables: everything here is loopback.
var defaultClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second},
}

func (i *Sampler) client() *http.Client {
	if i.Client != nil {
		return i.Client
	}
	return defaultClient
}

// Metrics is one scrape of istiod's Prometheus endpoint.
type Metrics struct {
	// At is the midpoint between sending the request and reading the whole body, the best guess
	// of when istiod gathered the values.
	At time.Time

	CPUSecondsTotal     float64 // process_cpu_seconds_total (10 ms resolution: /proc clock ticks)
	ResidentMemoryBytes float64 // process_resident_memory_bytes
	HeapInuseBytes      float64 // go_memstats_heap_inuse_bytes
	Goroutines          float64 // go_goroutines

	// RemoteSync holds every cluster that has istiod_remote_cluster_sync_status series, true when
	// its status="synced" sample is 1. A cluster that left stays here as false (istiod zeroes the
	// series, it does not delete them).
	RemoteSync map[string]bool
	// RemoteStatus maps a cluster to the status whose sample is 1 (synced, syncing, timeout,
	// closed), or to "" when none is (the cluster was deleted).
	RemoteStatus map[string]string
	// ManagedClusters is istiod_managed_clusters by cluster_type ("local", "remote").
	ManagedClusters map[string]float64

	// XDSPushes sums pilot_xds_pushes over every type except the *_senderr ones, which count
	// failed sends and are summed into XDSPushErrors instead. Both are nil when istiod exports no
	// pilot_xds_pushes (no push yet, or a build without the metric): absent, not zero.
	XDSPushes     *float64
	XDSPushErrors *float64
	// ConnectedXDS sums the pilot_xds gauge over proxy versions: xDS clients connected now; nil
	// when istiod exports no pilot_xds.
	ConnectedXDS *float64
	// CSRs and CertsIssued are istiod's CA counters since it started: CSRs received, certificates
	// signed. istiod exports each from its first count on, so an absent one is 0.
	CSRs, CertsIssued float64

	// Families is the whole parsed exposition, for metrics this struct does not name.
	Families map[string]*dto.MetricFamily
}

// Scrape reads and parses istiod's metrics once.
func (i *Sampler) Scrape(ctx context.Context) (*Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, i.MetricsURL, nil)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: metrics request: %w", i.Name, err)
	}
	// Ask for the classic text format so that only the text parser is needed.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	start := time.Now()
	resp, err := i.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("istiod %s: scrape %s: %w", i.Name, i.MetricsURL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	end := time.Now()
	if err != nil {
		return nil, fmt.Errorf("istiod %s: scrape %s: reading body: %w", i.Name, i.MetricsURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("istiod %s: scrape %s: HTTP %s: %s", i.Name, i.MetricsURL, resp.Status, snippet(body))
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mt != "text/plain" {
			return nil, fmt.Errorf("istiod %s: scrape %s: content type %q, want text/plain", i.Name, i.MetricsURL, ct)
		}
	}
	m, err := ParseMetrics(bytes.NewReader(body), start.Add(end.Sub(start)/2))
	if err != nil {
		return nil, fmt.Errorf("istiod %s: scrape %s: %w", i.Name, i.MetricsURL, err)
	}
	if f := i.onScrape.Load(); f != nil {
		(*f)(m)
	}
	return m, nil
}

// ParseMetrics parses a Prometheus text exposition as istiod serves it. It fails when one of the
// process/Go metrics that every istiod exports is missing.
func ParseMetrics(r io.Reader, at time.Time) (*Metrics, error) {
	// The zero TextParser has an invalid name-validation scheme in prometheus/common v0.67;
	// UTF8Validation accepts every legal name, legacy ones included.
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing exposition: %w", err)
	}
	var missing []string
	for _, name := range requiredMetrics {
		if f := fams[name]; f == nil || len(f.GetMetric()) == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("exposition lacks %s", strings.Join(missing, ", "))
	}

	m := &Metrics{
		At:                  at,
		CPUSecondsTotal:     sum(fams[MetricCPUSeconds], nil),
		ResidentMemoryBytes: sum(fams[MetricRSS], nil),
		HeapInuseBytes:      sum(fams[MetricHeapInuse], nil),
		Goroutines:          sum(fams[MetricGoroutines], nil),
		RemoteSync:          map[string]bool{},
		RemoteStatus:        map[string]string{},
		ManagedClusters:     map[string]float64{},
		ConnectedXDS:        sumIfPresent(fams[MetricXDSClients], nil),
		CSRs:                sum(fams[MetricCSRs], nil),
		CertsIssued:         sum(fams[MetricCertsIssued], nil),
		Families:            fams,
	}
	if f := fams[MetricManagedClusters]; f != nil {
		for _, s := range f.GetMetric() {
			m.ManagedClusters[label(s, LabelClusterType)] += value(s)
		}
	}
	if f := fams[MetricRemoteSync]; f != nil {
		for _, s := range f.GetMetric() {
			c := label(s, LabelCluster)
			if _, seen := m.RemoteStatus[c]; !seen {
				m.RemoteStatus[c] = ""
				m.RemoteSync[c] = false
			}
			if value(s) != 1 {
				continue
			}
			st := label(s, LabelStatus)
			if m.RemoteStatus[c] != "" {
				// istiod writes one 1 per cluster; two would make "synced" ambiguous.
				return nil, fmt.Errorf("%s: cluster %q has status %q and %q both at 1", MetricRemoteSync, c, m.RemoteStatus[c], st)
			}
			m.RemoteStatus[c] = st
			m.RemoteSync[c] = st == StatusSynced
		}
	}
	m.XDSPushes = sumIfPresent(fams[MetricXDSPushes], func(s *dto.Metric) bool {
		return !strings.HasSuffix(label(s, LabelType), "_senderr")
	})
	m.XDSPushErrors = sumIfPresent(fams[MetricXDSPushes], func(s *dto.Metric) bool {
		return strings.HasSuffix(label(s, LabelType), "_senderr")
	})
	return m, nil
}

// RemoteClusters returns the clusters istiod currently has a sync status for (status 1 in any
// state), sorted.
func (m *Metrics) RemoteClusters() []string {
	var out []string
	for c, st := range m.RemoteStatus {
		if st != "" {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// summary is a one-line description of a cluster's state in m, for error messages.
func (m *Metrics) summary(cluster string) string {
	if m == nil {
		return "no successful scrape"
	}
	st, known := m.RemoteStatus[cluster]
	var s string
	switch {
	case !known:
		s = fmt.Sprintf("no %s series for cluster %q", MetricRemoteSync, cluster)
	case st == "":
		s = fmt.Sprintf("%s{cluster=%q} all 0 (deleted)", MetricRemoteSync, cluster)
	default:
		s = fmt.Sprintf("%s{cluster=%q,status=%q} 1", MetricRemoteSync, cluster, st)
	}
	return fmt.Sprintf("%s; %s{cluster_type=\"remote\"} %g; remote clusters with a status: %v (scraped %s)",
		s, MetricManagedClusters, m.ManagedClusters["remote"], m.RemoteClusters(), m.At.Format(time.RFC3339Nano))
}

// sum adds the values of the samples of f that keep accepts (all when keep is nil).
func sum(f *dto.MetricFamily, keep func(*dto.Metric) bool) float64 {
	var total float64
	if f == nil {
		return 0
	}
	for _, s := range f.GetMetric() {
		if keep == nil || keep(s) {
			total += value(s)
		}
	}
	return total
}

// sumIfPresent is sum, or nil when f is not in the exposition at all.
func sumIfPresent(f *dto.MetricFamily, keep func(*dto.Metric) bool) *float64 {
	if f == nil || len(f.GetMetric()) == 0 {
		return nil
	}
	v := sum(f, keep)
	return &v
}

// value reads a counter, gauge or untyped sample; histograms and summaries are not expected in
// the metrics this package names.
func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	case s.Untyped != nil:
		return s.GetUntyped().GetValue()
	}
	return 0
}

func label(s *dto.Metric, name string) string {
	for _, l := range s.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func snippet(b []byte) string {
	const max = 200
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
