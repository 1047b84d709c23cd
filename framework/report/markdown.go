package report

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Markdown renders r as report.md.
func Markdown(r *Report) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	title := "# ambientmc report: " + r.Provider + " provider"
	if r.DataPlane != "" {
		title += ", " + r.DataPlane + " data plane"
	}
	p("%s\n\n", title)
	if r.DataPlane == DataPlaneEmulated {
		p("%s\n\n", EmulatedNote)
	}

	p("| | |\n|---|---|\n")
	if r.Istio != "" {
		p("| Istio | %s |\n", cell(r.Istio))
	}
	if r.Kubernetes != "" {
		p("| Kubernetes | %s |\n", cell(r.Kubernetes))
	}
	p("| Host | %d CPUs, %.1f GB memory |\n", r.Host.CPUs, float64(r.Host.MemoryBytes)/1e9)
	if r.Scale != nil {
		p("| Scale | %d services, %d pods per cluster |\n", r.Scale.ServicesPerCluster, r.Scale.PodsPerCluster)
	}
	p("| Clusters | %d |\n\n", len(r.Topology.Clusters))

	if len(r.Topology.Clusters) > 0 {
		p("## Topology\n\n| Cluster | Network | Primary |\n|---|---|---|\n")
		for _, c := range r.Topology.Clusters {
			p("| %s | %s | %t |\n", cell(c.Name), cell(c.Network), c.Primary)
		}
		p("\n")
	}

	if cp := r.ControlPlane; cp != nil {
		markdownControlPlane(&b, cp, r.Reference)
	}
	if l := r.Latency; l != nil {
		markdownLatency(&b, l, r.Reference)
	}

	if f := r.Failover; f != nil {
		p("## Failover\n\n| Service | Failover s | Failback s | Requests | Failed |\n|---|---|---|---|---|\n")
		p("| %s | %s | %s | %d | %d |\n\n", cell(f.Service), num(f.FailoverSeconds, 2), num(f.FailbackSeconds, 2), f.Requests, f.FailedRequests)
	}
	markdownChecks(&b, r.IstiodChecks)
	if s := r.Setup; s != nil {
		p("## Setup\n\nTotal %s s.\n\n", num(s.TotalSeconds, 1))
		if len(s.Clusters) > 0 {
			p("| Cluster | Ready s | RSS MB by process |\n|---|---|---|\n")
			for _, c := range s.Clusters {
				var parts []string
				for _, k := range sortedKeys(c.RSSBytes) {
					parts = append(parts, k+" "+num(c.RSSBytes[k]/bytesPerMB, 1))
				}
				p("| %s | %s | %s |\n", cell(c.Name), num(c.ReadySeconds, 2), cell(strings.Join(parts, ", ")))
			}
			p("\n")
		}
	}

	if len(r.Warnings) > 0 {
		p("## Warnings\n\n")
		for _, w := range r.Warnings {
			p("- %s\n", strings.ReplaceAll(w, "\n", " "))
		}
		p("\n")
	}
	return b.Bytes()
}

func markdownControlPlane(b *bytes.Buffer, cp *ControlPlane, ref Reference) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	others := "the other istiods ran during the joins"
	if cp.Istiods == IstiodsObserved {
		others = "only the observed istiod ran (quieter CPU figures)"
	}
	p("## Control plane\n\nObserved istiod: %s; istiods: %s (%s). MB = 10^6 bytes.\n\n", cell(cp.ObservedIstiod), cell(cp.Istiods), others)

	p("### Joins\n\n")
	p("| Remote clusters | Cluster | Sync s | xDS s | Convergence s | Join CPU-s | CPU cores | Steady CPU cores | RSS MB | Heap in use MB | Live heap MB | ΔCPU cores | ΔRSS MB | ΔHeap in use MB | ΔLive heap MB |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	sampleCells := func(s Sample) string {
		return strings.Join([]string{opt(s.CPUCores, 1, 4), opt(s.SteadyCPUCores, 1, 5),
			opt(s.RSSBytes, bytesPerMB, 1), opt(s.HeapInuseBytes, bytesPerMB, 1), opt(s.LiveHeapBytes, bytesPerMB, 1)}, " | ")
	}
	m := missingCellValue
	p("| 0 | baseline | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, m, m, m, sampleCells(cp.Baseline), m, m, m, m)
	for _, j := range cp.Joins {
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", j.RemoteClusters, cell(j.Cluster),
			opt(j.SyncSeconds, 1, 2), opt(j.XDSSeconds, 1, 2), opt(j.ConvergenceSeconds, 1, 2), opt(j.JoinCPUSeconds, 1, 2),
			sampleCells(j.Sample), opt(j.DeltaCPUCores, 1, 4), opt(j.DeltaRSSBytes, bytesPerMB, 1),
			opt(j.DeltaHeapInuseBytes, bytesPerMB, 1), opt(j.DeltaLiveHeapBytes, bytesPerMB, 1))
	}
	p("\n")

	if pr := cp.PerRemoteCluster; pr != nil {
		p("### Per remote cluster\n\n")
		p("Least-squares slope over the baseline and %d joins, ± its standard error (0 when only two points were fitted). "+
			"Join CPU is the slope of the cumulative join cost, i.e. CPU-seconds per added cluster.\n\n", len(cp.Joins))
		pubCPU := fmt.Sprintf("%s cores (%s%% of a core)", num(ref.PerRemoteClusterCPUCores, 3), num(ref.PerRemoteClusterCPUCores*100, 1))
		pubMem := num(ref.PerRemoteClusterMemoryBytes/bytesPerMB, 0) + " MB"
		p("| Metric | Measured | Published |\n|---|---|---|\n")
		p("| Steady CPU (cores) | %s | %s |\n", slope(pr.SteadyCPUCores, pr.SteadyCPUCoresStdErr, 1, 5), pubCPU)
		p("| CPU (cores) | %s | %s |\n", slope(pr.CPUCores, pr.CPUCoresStdErr, 1, 4), pubCPU)
		p("| Join CPU (CPU-s per cluster) | %s | %s |\n", slope(pr.JoinCPUSeconds, pr.JoinCPUSecondsStdErr, 1, 2), m)
		p("| RSS (MB) | %s | %s |\n", slope(pr.RSSBytes, pr.RSSBytesStdErr, bytesPerMB, 1), pubMem)
		p("| Heap in use (MB) | %s | %s |\n", slope(pr.HeapInuseBytes, pr.HeapInuseBytesStdErr, bytesPerMB, 1), m)
		p("| Live heap (MB) | %s | %s |\n\n", slope(pr.LiveHeapBytes, pr.LiveHeapBytesStdErr, bytesPerMB, 1), m)
	}

	if len(cp.Leaves) > 0 {
		p("### Leaves\n\n| Cluster | Remote clusters after | Seconds | RSS MB | Live heap MB | Managed remote clusters |\n|---|---|---|---|---|---|\n")
		for _, l := range cp.Leaves {
			p("| %s | %d | %s | %s | %s | %d |\n", cell(l.Cluster), l.RemoteClusters, opt(l.Seconds, 1, 2),
				opt(l.RSSBytes, bytesPerMB, 1), opt(l.LiveHeapBytes, bytesPerMB, 1), l.ManagedRemoteClusters)
		}
		p("\n")
	}
	if hasJoins(cp) {
		p("![istiod cost against joined remote clusters](%s)\n\n", ControlPlaneSVG)
	}
}

func markdownLatency(b *bytes.Buffer, l *Latency, ref Reference) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Latency\n\n")
	if l.HostCPUSaturated {
		p("**The host CPUs were saturated during the runs; the latencies include waiting for CPU.**\n\n")
	}
	table := func(runs []LatencyRun) {
		p("| Path | Connections | QPS | Duration s | Requests | Errors | Avg ms | p50 ms | p90 ms | p99 ms | Host CPU busy |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range runs {
			busy := missingCellValue
			if r.HostCPUBusy > 0 {
				busy = num(r.HostCPUBusy*100, 0) + "%"
			}
			p("| %s | %s | %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", cell(r.Path), cell(r.Connections), qps(r.QPS),
				num(r.DurationSeconds, 1), r.Requests, r.Errors, num(r.AvgMs, 3), num(r.P50Ms, 3), num(r.P90Ms, 3), num(r.P99Ms, 3), busy)
		}
		p("\n")
	}
	if len(l.Runs) > 0 {
		table(l.Runs)
	}
	if o := l.Overhead; o != nil {
		p("### Overhead\n\nCross-cluster minus local, on average latency.\n\n| Connections | Measured | Published |\n|---|---|---|\n")
		p("| new | %s | %s |\n", delta(o.New), delta(&Delta{ref.NewConnOverheadMs, ref.NewConnOverheadPercent}))
		p("| reused | %s | %s |\n\n", delta(o.Reused), delta(&Delta{ref.ReusedConnOverheadMs, ref.ReusedConnOverheadPercent}))
	}
	if len(l.HarnessFloor) > 0 {
		p("### Harness floor\n\nFortio client straight to the server, no data plane: the latency the harness itself adds.\n\n")
		table(l.HarnessFloor)
	}
	if hasRuns(l) {
		p("![latency by path and connection mode](%s)\n\n", LatencySVG)
	}
}

func delta(d *Delta) string {
	if d == nil {
		return missingCellValue
	}
	return fmt.Sprintf("%+.2f ms (%+.0f%%)", d.DeltaMs, d.Percent)
}

func slope(v, se *float64, scale float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	s := num(*v/scale, prec)
	if se != nil {
		s += " ± " + num(*se/scale, prec)
	}
	return s
}

func opt(v *float64, scale float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	return num(*v/scale, prec)
}

func num(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func qps(v float64) string {
	if v == 0 {
		return "max"
	}
	// Measured rates have many digits; one decimal is all a reader needs.
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// cell keeps free text from breaking a Markdown table row.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
