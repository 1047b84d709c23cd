package report

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ambientmc/ambientmc/framework/measure"
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
	if i := r.Istiod; i != nil {
		p("| istiod | %s |\n", cell(istiodLine(i)))
	}
	if r.Kubernetes != "" {
		p("| Kubernetes | %s |\n", cell(r.Kubernetes))
	}
	if r.NodeImage != "" {
		p("| Node image | %s |\n", cell(r.NodeImage))
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

	markdownGates(&b, r.Gates)
	if cp := r.ControlPlane; cp != nil {
		markdownControlPlane(&b, cp, r.Scale, r.Reference)
	}
	if l := r.Latency; l != nil {
		markdownLatency(&b, l, r.Reference)
	}

	if f := r.Failover; f != nil {
		p("## Failover\n\n| Service | To | Relation | Failover s | Failback s | Requests | Failed |\n|---|---|---|---|---|---|---|\n")
		p("| %s | %s | %s | %s | %s | %d | %d |\n\n", cell(f.Service), cell(f.Target), cell(f.Relation), num(f.FailoverSeconds, 2), num(f.FailbackSeconds, 2), f.Requests, f.FailedRequests)
	}
	if len(r.IstioImages) > 0 {
		fmt.Fprintf(&b, "## Istio images\n\n| Cluster | Component | Image | Resolved as |\n|---|---|---|---|\n")
		for _, im := range r.IstioImages {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(im.Cluster), cell(im.Component), cell(im.Image), cell(im.ImageID))
		}
		b.WriteString("\n")
	}
	markdownChecks(&b, r.IstiodChecks)
	markdownProfiles(&b, r.Profiles)
	if r.Churn != nil {
		markdownChurn(&b, r.Churn)
	}
	if r.Setup != nil {
		markdownSetup(&b, r.Setup)
	}

	if r.Plan != nil {
		markdownPlan(&b, r.Plan)
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

func markdownControlPlane(b *bytes.Buffer, cp *ControlPlane, scale *Scale, ref Reference) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	others := "the other istiods ran during the joins"
	if cp.Istiods == IstiodsObserved {
		others = "only the observed istiod ran (quieter CPU figures)"
	}
	p("## Control plane\n\nObserved istiod: %s; istiods: %s (%s). MB = 10^6 bytes.\n\n", cell(cp.ObservedIstiod), cell(cp.Istiods), others)
	settle, steady := windowText(cp.SettleSeconds), windowText(cp.SteadyWindowSeconds)
	if cp.CPUSource != "" {
		p("CPU from %s", cell(cp.CPUSource))
		if cp.CPUResolutionSeconds != nil {
			p(" (resolution %s s)", res(*cp.CPUResolutionSeconds))
		}
		if cp.CPUSource == measure.SchedstatName {
			// The kernel updates a running thread's counter at switches and ticks (measure.Schedstat).
			p("; a thread that is on a CPU at a read lags by up to one scheduler tick, which an idle istiod rarely is")
		}
		p(". ")
	}
	if cp.SettleSeconds == nil {
		settle = "each join's Settle s"
	}
	p("CPU columns: **Join CPU-s** is the CPU-seconds from just before the remote secret to convergence + %s (the join burst); "+
		"**Steady CPU cores** is the average over the %s window ending there; **Blended CPU cores** averages both over "+
		"the whole span, whose length follows the settle, so it is not comparable with a published steady figure. "+
		"A figure below its resolution (the CPU source's step over the window) is shown as \"< resolution\".", settle, steady)
	if cp.SettleRule != "" {
		p(" Settle: %s.", cell(cp.SettleRule))
	}
	p("\n\n")
	if mi := cp.MeasuredIstiod; mi != nil {
		p("Measured istiod: %s.\n\n", measuredText(mi))
	}

	p("### Joins\n\n")
	p("Convergence: the remote synced, and a ztunnel-like client holding the cluster's pods: as one split-horizon workload per global service through its east-west gateway (**split-horizon**, another network), or every pod as a workload of its own (**pod-workloads**, the same network).\n\n")
	p("| Remote clusters | Cluster | Criterion | Sync s | xDS s | Convergence s | Settle s | Join CPU-s | Blended CPU cores | Steady CPU cores | RSS MB | Heap in use MB | Live heap MB | ΔBlended CPU cores | ΔRSS MB | ΔHeap in use MB | ΔLive heap MB | Host CPU busy |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	sampleCells := func(s Sample) string {
		return strings.Join([]string{cpu(s.CPUCores, s.CPUCoresResolution, 4), cpu(s.SteadyCPUCores, s.SteadyCPUCoresResolution, 5),
			opt(s.RSSBytes, bytesPerMB, 1), opt(s.HeapInuseBytes, bytesPerMB, 1), opt(s.LiveHeapBytes, bytesPerMB, 1)}, " | ")
	}
	m := missingCellValue
	p("| 0 | baseline | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, m, m, m, m, m, sampleCells(cp.Baseline), m, m, m, m, m)
	prev := cp.Baseline
	for _, j := range cp.Joins {
		// A difference of two readings is known to within both their resolutions.
		var dres *float64
		if prev.CPUCoresResolution != nil && j.CPUCoresResolution != nil {
			dres = F(*prev.CPUCoresResolution + *j.CPUCoresResolution)
		}
		busy := m
		if j.HostCPUBusy != nil {
			busy = num(*j.HostCPUBusy*100, 0) + "%"
		}
		settled := opt(j.SettleSeconds, 1, 1)
		if j.SettleCapped {
			settled += " (cap)"
		}
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", j.RemoteClusters, cell(j.Cluster), cell(j.Criterion),
			opt(j.SyncSeconds, 1, 2), opt(j.XDSSeconds, 1, 2), opt(j.ConvergenceSeconds, 1, 2), settled, cpu(j.JoinCPUSeconds, j.JoinCPUSecondsResolution, 2),
			sampleCells(j.Sample), cpu(j.DeltaCPUCores, dres, 4), opt(j.DeltaRSSBytes, bytesPerMB, 1),
			opt(j.DeltaHeapInuseBytes, bytesPerMB, 1), opt(j.DeltaLiveHeapBytes, bytesPerMB, 1), busy)
		prev = j.Sample
	}
	p("\n")

	if pr := cp.PerRemoteCluster; pr != nil {
		p("### Per remote cluster\n\n")
		p("Least-squares slope over the baseline and %d joins, ± its standard error (- when fewer than three points were fitted: "+
			"two points leave no residual to estimate it). Join CPU is the slope of the cumulative join cost, i.e. CPU-seconds per added cluster. "+
			"A CPU slope's resolution is one resolution step across the fitted range of remote clusters.\n\n", len(cp.Joins))
		if scale == nil || *scale != ref.Scale {
			run := "was not recorded"
			if scale != nil {
				run = fmt.Sprintf("was %d services and %d pods per cluster", scale.ServicesPerCluster, scale.PodsPerCluster)
			}
			p("**Scales differ:** the published figures are at %d services and %d pods per cluster; this run's scale %s. "+
				"Per-remote cost grows with what each remote cluster holds, so the columns below are not like for like.\n\n",
				ref.Scale.ServicesPerCluster, ref.Scale.PodsPerCluster, run)
		}
		pubCPU := fmt.Sprintf("%s cores (%s%% of a core)", num(ref.PerRemoteClusterCPUCores, 3), num(ref.PerRemoteClusterCPUCores*100, 1))
		pubMem := num(ref.PerRemoteClusterMemoryBytes/bytesPerMB, 0) + " MB"
		p("| Metric | Measured | Published |\n|---|---|---|\n")
		p("| Steady CPU (cores, %s window) | %s | %s |\n", steady, cpuSlope(pr.SteadyCPUCores, pr.SteadyCPUCoresStdErr, pr.SteadyCPUCoresResolution, 5), pubCPU)
		p("| Join burst CPU (CPU-s per cluster) | %s | %s |\n", cpuSlope(pr.JoinCPUSeconds, pr.JoinCPUSecondsStdErr, pr.JoinCPUSecondsResolution, 2), m)
		p("| Blended CPU (cores, burst and steady over convergence + %s; not comparable) | %s | %s |\n", settle,
			cpuSlope(pr.CPUCores, pr.CPUCoresStdErr, pr.CPUCoresResolution, 4), m)
		p("| RSS (MB) | %s | %s |\n", slope(pr.RSSBytes, pr.RSSBytesStdErr, bytesPerMB, 1), pubMem)
		p("| Heap in use (MB) | %s | %s |\n", slope(pr.HeapInuseBytes, pr.HeapInuseBytesStdErr, bytesPerMB, 1), m)
		p("| Live heap (MB) | %s | %s |\n\n", slope(pr.LiveHeapBytes, pr.LiveHeapBytesStdErr, bytesPerMB, 1), m)
	}
	if g := cp.JoinGrowth; g != nil {
		p("### Join cost against mesh size\n\n")
		p("Each join's own cost fitted against k, the remote clusters already joined when it started: the k-th join costs a + b·k. " +
			"A b well above its standard error means joins get dearer as the mesh grows (and the per-remote join CPU above is then the average join's cost, not the next one's).\n\n")
		p("| Per join | a (first join) | b (per joined cluster) | Joins fitted |\n|---|---|---|---|\n")
		row := func(name string, l *Line) {
			if l == nil {
				return
			}
			b := num(l.Slope, 3) + " ± -"
			if l.SlopeStdErr != nil {
				b = num(l.Slope, 3) + " ± " + num(*l.SlopeStdErr, 3)
			}
			p("| %s | %s | %s | %d |\n", name, num(l.Intercept, 2), b, l.N)
		}
		row("Join CPU-s", g.JoinCPUSeconds)
		row("Convergence s", g.ConvergenceSeconds)
		row("Remote sync s", g.SyncSeconds)
		p("\n")
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

// windowText names a window length from the flags, or says it was not recorded.
// measuredText says which istiod a section measured and what it had held.
func measuredText(mi *MeasuredIstiod) string {
	switch {
	case mi.Note != "":
		return cell(mi.Cluster) + ", " + cell(mi.Note)
	case mi.Restarted:
		return fmt.Sprintf("%s, restarted fresh for this (it had held %d remote clusters)", cell(mi.Cluster), mi.HeldBefore)
	}
	return cell(mi.Cluster) + ", fresh (it had held no remote cluster)"
}

// markdownPlan is the run's time plan beside what each part took.
func markdownPlan(b *bytes.Buffer, pl *Plan) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Time plan\n\nPlanned before anything started: %s s in all", num(pl.TotalSeconds, 0))
	if pl.TimeoutSeconds != nil {
		p(" of go test's -timeout of %s s (%s s kept free for the report and teardown)", num(*pl.TimeoutSeconds, 0), opt(pl.MarginSeconds, 1, 0))
	}
	p(".\n\n| Part | Planned s | Took s | What |\n|---|---|---|---|\n")
	for _, it := range pl.Items {
		what := it.Detail
		if it.Trimmed {
			what += " (trimmed to fit)"
		}
		p("| %s | %s | %s | %s |\n", cell(it.Name), num(it.PlannedSeconds, 1), opt(it.ActualSeconds, 1, 1), cell(what))
	}
	p("\n")
	for _, w := range pl.Warnings {
		p("- %s\n", cell(w))
	}
	if len(pl.Warnings) > 0 {
		p("\n")
	}
}

func windowText(s *float64) string {
	if s == nil {
		return "the settle time (not recorded)"
	}
	return num(*s, 0) + " s"
}

// cpu prints a CPU figure, or "< resolution (below resolution)" when it is not resolved. Small
// figures keep two significant digits, so a resolved value never prints as 0.
func cpu(v, resolution *float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	if resolution != nil && math.Abs(*v) < *resolution {
		return "< " + res(*resolution) + " (below resolution)"
	}
	return num(*v, sigPrec(*v, prec))
}

// cpuSlope is slope for a CPU figure with a resolution.
func cpuSlope(v, se, resolution *float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	if resolution != nil && math.Abs(*v) < *resolution {
		return "< " + res(*resolution) + " (below resolution)"
	}
	pr := sigPrec(*v, prec)
	return num(*v, pr) + " ± " + opt(se, 1, pr)
}

// optRes prints an optional resolution with two significant digits.
func optRes(v *float64) string {
	if v == nil {
		return missingCellValue
	}
	return res(*v)
}

// res prints a resolution with two significant digits.
func res(v float64) string { return strconv.FormatFloat(v, 'g', 2, 64) }

// sigPrec is at least prec decimals, more when v needs them for two significant digits.
func sigPrec(v float64, prec int) int {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return prec
	}
	return max(prec, int(math.Ceil(-math.Log10(math.Abs(v))))+1)
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
	if rs := l.RateSearch; rs != nil {
		if rs.Forced {
			p("Request rate: %s QPS, forced by -latency.qps.\n\n", qps(rs.QPS))
		} else {
			p("Request rate: %s QPS, the highest this host carried in the probe steps below (%s).\n\n", qps(rs.QPS), rs.Rule)
			p("| Requested QPS | Achieved QPS | Host CPU busy | Accepted | Why |\n|---|---|---|---|---|\n")
			for _, st := range rs.Steps {
				busy := missingCellValue
				if st.HostCPUBusy > 0 {
					busy = num(st.HostCPUBusy*100, 0) + "%"
				}
				p("| %s | %s | %s | %t | %s |\n", qps(st.QPS), qps(st.AchievedQPS), busy, st.Accepted, cell(st.Reason))
			}
			p("\n")
		}
	}
	if len(l.Runs) > 0 {
		table(l.Runs)
	}
	if o := l.Overhead; o != nil && l.HostCPUSaturated {
		// A saturated host's latency is not the mesh's: never beside the published figures.
		p("### Overhead\n\nCross-cluster minus local, on average latency. Not comparable with the published figures: the host was saturated.\n\n| Connections | Measured |\n|---|---|\n")
		p("| new | %s |\n", delta(o.New))
		p("| reused | %s |\n\n", delta(o.Reused))
	} else if o != nil {
		p("### Overhead\n\nCross-cluster minus local, on average latency.\n\n| Connections | Measured | Published |\n|---|---|---|\n")
		p("| new | %s | %s |\n", delta(o.New), delta(&Delta{ref.NewConnOverheadMs, ref.NewConnOverheadPercent}))
		p("| reused | %s | %s |\n\n", delta(o.Reused), delta(&Delta{ref.ReusedConnOverheadMs, ref.ReusedConnOverheadPercent}))
	}
	if o := l.SameNetworkOverhead; o != nil {
		p("### Same-network overhead\n\nAnother cluster on the client's network (single HBONE, no gateway) minus local, on average latency; the published figures cover only the other network's path.\n\n| Connections | Measured |\n|---|---|\n")
		p("| new | %s |\n", delta(o.New))
		p("| reused | %s |\n\n", delta(o.Reused))
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
	if d == nil || !finiteValue(d.DeltaMs) || !finiteValue(d.Percent) {
		return missingCellValue
	}
	return fmt.Sprintf("%+.2f ms (%+.0f%%)", d.DeltaMs, d.Percent)
}

func slope(v, se *float64, scale float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	// An absent standard error (fewer than three points) shows as "-", never as 0.
	return num(*v/scale, prec) + " ± " + opt(se, scale, prec)
}

func opt(v *float64, scale float64, prec int) string {
	if v == nil {
		return missingCellValue
	}
	return num(*v/scale, prec)
}

// num prints v with prec decimals; a non-finite value is no measurement and prints as absent.
func num(v float64, prec int) string {
	if !finiteValue(v) {
		return missingCellValue
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func qps(v float64) string {
	if !finiteValue(v) {
		return missingCellValue
	}
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

// istiodLine names the istiod that ran: version (or "binary"), path, short sha256, replaced pins.
func istiodLine(i *Istiod) string {
	what := "binary"
	if i.Version != "" {
		what = i.Version
	}
	sha := i.SHA256
	if len(sha) > 12 {
		sha = sha[:12]
	}
	out := fmt.Sprintf("%s (%s, sha256 %s", what, i.Binary, sha)
	if i.GoVersion != "" {
		out += ", " + i.GoVersion
	}
	out += ")"
	if len(i.ReplacedPins) > 0 {
		out += "; replaced pins: " + strings.Join(i.ReplacedPins, "; ")
	}
	return out
}
