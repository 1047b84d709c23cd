// Package timeline keeps every scrape the framework makes of istiod's metrics as a row of a CSV
// (metrics.csv in the report directory), written as the run goes, so a CI failure can be read
// afterwards without running again.
package timeline

import (
	"encoding/csv"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/measure"
)

// File is the timeline's name in the report directory.
const File = "metrics.csv"

// Columns are named after the metrics they hold (framework/measure); an empty cell is a metric
// the scrape did not have.
var Columns = []string{
	"time", "seconds", "istiod",
	measure.MetricCPUSeconds, measure.MetricRSS, measure.MetricHeapInuse, measure.MetricGoroutines,
	measure.MetricManagedClusters + "_remote", measure.MetricXDSClients, measure.MetricXDSPushes, measure.MetricXDSPushes + "_senderr",
	measure.MetricRemoteSync,
}

// Timeline is an open metrics.csv.
type Timeline struct {
	mu    sync.Mutex
	f     *os.File
	w     *csv.Writer
	start time.Time
	err   error
}

// Open creates path with the header row; seconds count from now.
func Open(path string) (*Timeline, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	t := &Timeline{f: f, w: csv.NewWriter(f), start: time.Now()}
	if err := t.write(Columns); err != nil {
		f.Close()
		return nil, err
	}
	return t, nil
}

// Follow records every later scrape of i under name.
func (t *Timeline) Follow(name string, i *measure.Sampler) {
	i.OnScrape(func(m *measure.Metrics) { t.Record(name, m) })
}

// Record writes one scrape.
func (t *Timeline) Record(name string, m *measure.Metrics) {
	opt := func(p *float64) string {
		if p == nil {
			return ""
		}
		return num(*p)
	}
	remote := ""
	if v, ok := m.ManagedClusters["remote"]; ok {
		remote = num(v)
	}
	var sync []string
	for _, c := range slices.Sorted(maps.Keys(m.RemoteStatus)) {
		st := m.RemoteStatus[c]
		if st == "" {
			st = "gone"
		}
		sync = append(sync, c+"="+st)
	}
	_ = t.write([]string{
		m.At.UTC().Format(time.RFC3339Nano), strconv.FormatFloat(m.At.Sub(t.start).Seconds(), 'f', 3, 64), name,
		num(m.CPUSecondsTotal), num(m.ResidentMemoryBytes), num(m.HeapInuseBytes), num(m.Goroutines),
		remote, opt(m.ConnectedXDS), opt(m.XDSPushes), opt(m.XDSPushErrors), strings.Join(sync, ";"),
	})
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// write adds a row and flushes it, so the file holds every row up to a crash.
func (t *Timeline) write(row []string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if err := t.w.Write(row); err != nil {
		t.err = err
		return err
	}
	t.w.Flush()
	t.err = t.w.Error()
	return t.err
}

// Close ends the timeline; later scrapes are not written. It reports the first write error.
func (t *Timeline) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return t.err
	}
	err := t.f.Close()
	t.f = nil
	if t.err == nil {
		t.err = fmt.Errorf("timeline closed")
		return err
	}
	return t.err
}
