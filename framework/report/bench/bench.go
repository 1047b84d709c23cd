// Package bench writes a report as Go benchmark lines (bench.txt), which benchstat compares
// between runs.
package bench

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
)

// Render renders r as Go benchmark lines (bench.txt) so benchstat can compare two runs:
// BenchmarkSetup, BenchmarkJoin (baseline, each join, perRemote, growth: the fit of each join's
// cost against the clusters already joined), BenchmarkLeave and BenchmarkLatency.
// Every line has iteration count 1 and only measured values. Only what makes two runs different
// experiments (provider, data plane) is a "key: value" header line: benchstat puts files whose
// header lines differ into separate tables. Configuration that may differ between runs one wants
// to compare (scale, istiods) is part of the benchmark names, and which istiod ran is left out of
// the bench lines altogether (report.json has it), so `benchstat a/bench.txt b/bench.txt` of two
// istiods compares them column by column.
func Render(r *report.Report) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: %s\n", runtime.GOOS, runtime.GOARCH, benchPkg)
	fmt.Fprintf(&b, "provider: %s\n", token(r.Provider))
	if r.DataPlane != "" {
		fmt.Fprintf(&b, "dataplane: %s\n", token(r.DataPlane))
	}
	prefix := func(kind string) string {
		name := fmt.Sprintf("Benchmark%s/clusters=%d", kind, len(r.Topology.Clusters))
		if r.Scale != nil {
			name += fmt.Sprintf("/services=%d/pods=%d", r.Scale.ServicesPerCluster, r.Scale.PodsPerCluster)
		}
		if r.ControlPlane != nil && kind != "Setup" {
			name += "/istiods=" + token(r.ControlPlane.Istiods)
		}
		return name
	}

	if s := r.Setup; s != nil {
		line(&b, prefix("Setup"), append([]metric{{s.TotalSeconds, "total-s"}}, optMetrics(
			optMetric{s.APIServersReadySeconds, "apiservers-ready-s"}, optMetric{s.CRDsEstablishedSeconds, "crds-established-s"},
			optMetric{s.PerClusterRSSBytes, "rss-per-cluster-B"}, optMetric{s.PerClusterUniqueBytes, "unique-per-cluster-B"},
			optMetric{s.PeakHostMemoryBytes, "peak-host-B"}, optMetric{s.TestProcessPeakRSSBytes, "test-process-peak-rss-B"})...)...)
		for _, sp := range s.Shared {
			line(&b, prefix("Setup")+"/shared="+token(sp.Name), append([]metric{{sp.RSSBytes, "rss-B"}},
				optMetrics(optMetric{sp.DatabaseBytes, "db-B"})...)...)
		}
		for _, c := range s.Clusters {
			ms := []metric{{c.ReadySeconds, "ready-s"}}
			for _, k := range slices.Sorted(maps.Keys(c.RSSBytes)) {
				ms = append(ms, metric{c.RSSBytes[k], "rss-" + token(k) + "-B"})
			}
			line(&b, prefix("Setup")+"/cluster="+token(c.Name), ms...)
		}
	}

	if cp := r.ControlPlane; cp != nil {
		name := prefix("Join")
		line(&b, name+"/join=0", sampleMetrics(cp.Baseline)...)
		for _, j := range cp.Joins {
			ms := optMetrics(
				optMetric{j.SyncSeconds, "sync-s"}, optMetric{j.XDSSeconds, "xds-s"},
				optMetric{j.ConvergenceSeconds, "convergence-s"}, optMetric{j.JoinCPUSeconds, "join-cpu-s"})
			ms = append(ms, sampleMetrics(j.Sample)...)
			line(&b, fmt.Sprintf("%s/join=%d", name, j.RemoteClusters), ms...)
		}
		if pr := cp.PerRemoteCluster; pr != nil {
			line(&b, name+"/perRemote", optMetrics(
				optMetric{pr.CPUCores.ValueOf(), "cpu-cores"}, optMetric{pr.CPUCores.StdErrOf(), "cpu-cores-stderr"},
				optMetric{pr.SteadyCPUCores.ValueOf(), "steady-cpu-cores"}, optMetric{pr.SteadyCPUCores.StdErrOf(), "steady-cpu-cores-stderr"},
				optMetric{pr.JoinCPUSeconds.ValueOf(), "join-cpu-s"}, optMetric{pr.JoinCPUSeconds.StdErrOf(), "join-cpu-s-stderr"},
				optMetric{pr.RSSBytes.ValueOf(), "rss-B"}, optMetric{pr.RSSBytes.StdErrOf(), "rss-stderr-B"},
				optMetric{pr.HeapInuseBytes.ValueOf(), "heap-inuse-B"}, optMetric{pr.HeapInuseBytes.StdErrOf(), "heap-inuse-stderr-B"},
				optMetric{pr.LiveHeapBytes.ValueOf(), "live-heap-B"}, optMetric{pr.LiveHeapBytes.StdErrOf(), "live-heap-stderr-B"})...)
		}
		if g := cp.JoinGrowth; g != nil {
			var ms []metric
			for _, f := range []struct {
				l    *report.Line
				unit string
			}{{g.JoinCPUSeconds, "join-cpu-s"}, {g.ConvergenceSeconds, "convergence-s"}, {g.SyncSeconds, "sync-s"}} {
				if f.l == nil {
					continue
				}
				ms = append(ms, metric{f.l.Intercept, f.unit + "-first"}, metric{f.l.Slope, f.unit + "-per-joined"})
				ms = append(ms, optMetrics(optMetric{f.l.SlopeStdErr, f.unit + "-per-joined-stderr"})...)
			}
			line(&b, name+"/growth", ms...)
		}
		for _, l := range cp.Leaves {
			ms := optMetrics(optMetric{l.Seconds, "leave-s"}, optMetric{l.RSSBytes, "rss-B"}, optMetric{l.LiveHeapBytes, "live-heap-B"})
			ms = append(ms, metric{float64(l.ManagedRemoteClusters), "managed-remote-clusters"})
			line(&b, fmt.Sprintf("%s/leave=%d", prefix("Leave"), l.RemoteClusters), ms...)
		}
		if ret := analysis.MemoryReturned(cp); ret != nil {
			line(&b, prefix("Leave")+"/returned", optMetrics(
				optMetric{ret.LiveHeapBytes, "returned-live-heap-B"}, optMetric{ret.RSSBytes, "returned-rss-B"},
				optMetric{ret.LeftoverLiveHeap, "leftover-live-heap-B"}, optMetric{ret.LeftoverRSSBytes, "leftover-rss-B"})...)
		}
	}

	if l := r.Latency; l != nil {
		for _, run := range append(slices.Clone(l.Runs), l.HarnessFloor...) {
			qpsName := "max"
			if run.QPS > 0 {
				// Measured rates wobble in the last digits; benchstat matches names exactly, so
				// round to the nearest 10 requests per second.
				qpsName = strconv.FormatFloat(math.Round(run.QPS/10)*10, 'f', 0, 64)
			}
			name := fmt.Sprintf("BenchmarkLatency/path=%s/conn=%s/qps=%s", token(run.Path), token(run.Connections), qpsName)
			ms := []metric{{run.AvgMs, "avg-ms"}, {run.P50Ms, "p50-ms"}, {run.P90Ms, "p90-ms"}, {run.P99Ms, "p99-ms"},
				{float64(run.Requests), "requests"}, {float64(run.Errors), "errors"}}
			if run.HostCPUBusy > 0 {
				ms = append(ms, metric{run.HostCPUBusy, "host-cpu-busy"})
			}
			line(&b, name, ms...)
		}
	}
	benchChurn(&b, len(r.Topology.Clusters), r.Churn)
	return b.Bytes()
}

// File is the name of the bench lines in a report directory.
const File = "bench.txt"

// benchPkg is the package benchstat names: the suites the lines measure.
const benchPkg = "github.com/ambientmc/ambientmc/suites/multicluster"

type metric struct {
	v    float64
	unit string
}

type optMetric struct {
	v    *float64
	unit string
}

func optMetrics(ms ...optMetric) []metric {
	var out []metric
	for _, m := range ms {
		if m.v != nil {
			out = append(out, metric{*m.v, m.unit})
		}
	}
	return out
}

func sampleMetrics(s report.Sample) []metric {
	return optMetrics(optMetric{s.CPUCores, "cpu-cores"}, optMetric{s.SteadyCPUCores, "steady-cpu-cores"},
		optMetric{s.RSSBytes, "rss-B"}, optMetric{s.HeapInuseBytes, "heap-inuse-B"}, optMetric{s.LiveHeapBytes, "live-heap-B"})
}

// line writes one benchmark line; non-finite values are dropped (benchstat cannot parse them) and a
// line left without values is not written, since the benchmark format needs at least one.
func line(b *bytes.Buffer, name string, ms ...metric) {
	var sb strings.Builder
	for _, m := range ms {
		if math.IsNaN(m.v) || math.IsInf(m.v, 0) {
			continue
		}
		// Six significant digits: beyond that the measurements are noise.
		fmt.Fprintf(&sb, " %s %s", strconv.FormatFloat(m.v, 'g', 6, 64), m.unit)
	}
	if sb.Len() == 0 {
		return
	}
	fmt.Fprintf(b, "%s 1%s\n", name, sb.String())
}

// token makes s usable inside a benchmark name or unit: no spaces, which would split the line.
func token(s string) string {
	if s == "" {
		return "none"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, s)
}
