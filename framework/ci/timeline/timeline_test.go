package timeline

import (
	"context"
	"encoding/csv"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ambientmc/ambientmc/framework/measure"
)

// metricsServer exports what istiod exports through client_golang's default collectors, plus
// the remote-cluster series the suites watch.
func metricsServer(t *testing.T) (*measure.Sampler, *prometheus.GaugeVec) {
	reg := prometheus.NewRegistry()
	sync := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: measure.MetricRemoteSync}, []string{"cluster", "cluster_type", "status"})
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector(), sync)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &measure.Sampler{Name: "cluster-1/istiod", MetricsURL: srv.URL + "/metrics"}, sync
}

func TestEveryScrapeIsARow(t *testing.T) {
	path := filepath.Join(t.TempDir(), File)
	tl, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	i, status := metricsServer(t)
	tl.Follow("cluster-1", i)
	status.WithLabelValues("cluster-2", "remote", "synced").Set(1)
	status.WithLabelValues("cluster-3", "remote", "syncing").Set(1)
	status.WithLabelValues("cluster-3", "remote", "synced").Set(0)
	var wg sync.WaitGroup
	for range 8 { // the suites scrape from several goroutines at once
		wg.Go(func() {
			if _, err := i.Scrape(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Rows are on disk before Close: a crash loses nothing written so far.
	rows := read(t, path)
	if len(rows) != 9 || !slices.Equal(rows[0], Columns) {
		t.Fatalf("%d rows, header %v", len(rows), rows[0])
	}
	col := func(name string) int { return slices.Index(Columns, name) }
	r := rows[1]
	if r[col("istiod")] != "cluster-1" || r[col(measure.MetricRemoteSync)] != "cluster-2=synced;cluster-3=syncing" {
		t.Errorf("row %v", r)
	}
	for _, c := range []string{measure.MetricCPUSeconds, measure.MetricRSS, measure.MetricHeapInuse, measure.MetricGoroutines, "seconds"} {
		if v, err := strconv.ParseFloat(r[col(c)], 64); err != nil || v < 0 {
			t.Errorf("%s = %q", c, r[col(c)])
		}
	}
	// What the exporter does not have is empty, never 0.
	for _, c := range []string{measure.MetricXDSClients, measure.MetricXDSPushes, measure.MetricManagedClusters + "_remote"} {
		if r[col(c)] != "" {
			t.Errorf("%s = %q, want empty (not exported)", c, r[col(c)])
		}
	}
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := i.Scrape(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(read(t, path)); n != 9 {
		t.Errorf("a scrape after Close was written: %d rows", n)
	}
}

func read(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
