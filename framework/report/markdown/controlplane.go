package markdown

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/svg"
)

func controlPlane(b *bytes.Buffer, cp *report.ControlPlane, scale *report.Scale, ref report.Reference, setup *report.Setup) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	others := "the other istiods ran during the joins"
	if cp.Istiods == report.IstiodsObserved {
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
	p("| Remote clusters | Cluster | Criterion | Sync s | xDS s | Convergence s | Settle s | Join CPU-s | Blended CPU cores | Steady CPU cores | RSS MB | Working set MB | Heap in use MB | Live heap MB | ΔBlended CPU cores | ΔRSS MB | ΔHeap in use MB | ΔLive heap MB | Host CPU busy |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	sampleCells := func(s report.Sample) string {
		return strings.Join([]string{cpu(s.CPUCores, s.CPUCoresResolution, 4), cpu(s.SteadyCPUCores, s.SteadyCPUCoresResolution, 5),
			opt(s.RSSBytes, bytesPerMB, 1), opt(s.WorkingSetBytes, bytesPerMB, 1), opt(s.HeapInuseBytes, bytesPerMB, 1), opt(s.LiveHeapBytes, bytesPerMB, 1)}, " | ")
	}
	m := missingCellValue
	p("| 0 | baseline | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m, m, m, m, m, m, sampleCells(cp.Baseline), m, m, m, m, m)
	prev := cp.Baseline
	for _, j := range cp.Joins {
		// A difference of two readings is known to within both their resolutions.
		var dres *float64
		if prev.CPUCoresResolution != nil && j.CPUCoresResolution != nil {
			dres = report.F(*prev.CPUCoresResolution + *j.CPUCoresResolution)
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
	xdsPushes(b, cp.Joins)
	istiodClients(b, cp.Clients)

	if pr := cp.PerRemoteCluster; pr != nil {
		p("### Per remote cluster\n\n")
		p("%s\n\n", perRemoteText(cp))
		if scale == nil || *scale != ref.Scale {
			run := "was not recorded"
			if scale != nil {
				run = fmt.Sprintf("was %d services and %d pods per cluster", scale.ServicesPerCluster, scale.PodsPerCluster)
			}
			p("**Scales differ:** the published figures are at %d services and %d pods per cluster; this run's scale %s. "+
				"Per-remote cost grows with what each remote cluster holds, so the columns below are not like for like.\n\n",
				ref.Scale.ServicesPerCluster, ref.Scale.PodsPerCluster, run)
		}
		p("%s\n\n", endpointSlicesText(cp, setup))
		pubCPU := fmt.Sprintf("%s cores (%s%% of a core)", num(ref.PerRemoteClusterCPUCores, 3), num(ref.PerRemoteClusterCPUCores*100, 1))
		pubMem := num(ref.PerRemoteClusterMemoryBytes/bytesPerMB, 0) + " MB"
		p("| Metric | Measured | Published |\n|---|---|---|\n")
		p("| Steady CPU (cores, %s window) | %s | %s |\n", steady, estCPU(pr.SteadyCPUCores, 5), pubCPU)
		p("| Join burst CPU (CPU-s per cluster) | %s | %s |\n", estCPU(pr.JoinCPUSeconds, 2), m)
		p("| Blended CPU (cores, burst and steady over convergence + %s; not comparable) | %s | %s |\n", settle,
			estCPU(pr.CPUCores, 4), m)
		p("| RSS (MB) | %s | %s |\n", est(pr.RSSBytes, bytesPerMB, 1), pubMem)
		p("| Heap in use (MB) | %s | %s |\n", est(pr.HeapInuseBytes, bytesPerMB, 2), m)
		p("| Live heap (MB) | %s | %s |\n", est(pr.LiveHeapBytes, bytesPerMB, 2), m)
		p("| Working set (MB, as kubelet reads a container) | %s | %s |\n\n", est(pr.WorkingSetBytes, bytesPerMB, 1), m)
		p("%s\n\n", closestText(cp, ref.PerRemoteClusterMemoryBytes))
		sequences(b, cp)
	}
	if g := cp.JoinGrowth; g != nil {
		p("### Join cost against mesh size\n\n")
		p("Each join's own cost fitted against k, the remote clusters already joined when it started: the k-th join costs a + b·k. " +
			"A b well above its standard error means joins get dearer as the mesh grows (and the per-remote join CPU above is then the average join's cost, not the next one's).\n\n")
		p("| Per join | a (first join) | b (per joined cluster) | Joins fitted |\n|---|---|---|---|\n")
		row := func(name string, l *report.Line) {
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
	if svg.DrawsControlPlane(cp) {
		p("![istiod cost against joined remote clusters](%s)\n\n", svg.ControlPlaneFile)
	}
}

// measuredText says which istiod a section measured and what it had held.
func measuredText(mi *report.MeasuredIstiod) string {
	switch {
	case mi.Note != "":
		return cell(mi.Cluster) + ", " + cell(mi.Note)
	case mi.Restarted:
		return fmt.Sprintf("%s, restarted fresh for this (it had held %d remote clusters)", cell(mi.Cluster), mi.HeldBefore)
	case mi.Kept:
		return fmt.Sprintf("%s, kept (it had held %d remote clusters since it started, all still members: none had left or been rebuilt)", cell(mi.Cluster), mi.HeldBefore)
	}
	return cell(mi.Cluster) + ", fresh (it had held no remote cluster)"
}

// perRemoteText says what the per-remote figures and their errors are.
func perRemoteText(cp *report.ControlPlane) string {
	const cpuText = "Join CPU is the slope of the cumulative join cost, i.e. CPU-seconds per added cluster. " +
		"A CPU slope's resolution is one resolution step across the fitted range of remote clusters."
	if cp.PerRemoteCluster.StdErrOf == report.StdErrOfSequences {
		return fmt.Sprintf("Mean of %d join sequences' least-squares slopes, each over a fresh istiod's baseline and its joins (the Joins table shows the first), "+
			"± the standard error of that mean: it includes the spread from one fresh istiod to the next, which one sequence's fit cannot see. %s",
			len(cp.Sequences), cpuText)
	}
	return fmt.Sprintf("Least-squares slope over the baseline and %d joins, ± its standard error (- when fewer than three points were fitted: "+
		"two points leave no residual to estimate it). %s "+
		"The standard error says how well a line fits these points, not how far the slope moves from one istiod to the next: "+
		"`-join.repeats=3` measures three sequences, each on a fresh istiod, and gives the standard error of their mean; "+
		"`make compare` compares two builds by medians over rounds.", len(cp.Joins), cpuText)
}

// sequences lists each join sequence's baseline and per-remote figures, and their mean.
func sequences(b *bytes.Buffer, cp *report.ControlPlane) {
	if len(cp.Sequences) < 2 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("#### Join sequences\n\n")
	p("| Sequence | Measured istiod | Baseline live heap MB | Baseline heap in use MB | Baseline RSS MB | Live heap MB per remote | Heap in use MB per remote | RSS MB per remote | Join CPU-s per remote |\n")
	p("|---|---|---|---|---|---|---|---|---|\n")
	perCells := func(pr *report.PerRemote) string {
		if pr == nil {
			pr = &report.PerRemote{}
		}
		return strings.Join([]string{est(pr.LiveHeapBytes, bytesPerMB, 2), est(pr.HeapInuseBytes, bytesPerMB, 2),
			est(pr.RSSBytes, bytesPerMB, 1), estCPU(pr.JoinCPUSeconds, 2)}, " | ")
	}
	for k, s := range cp.Sequences {
		istiod := missingCellValue
		if s.MeasuredIstiod != nil {
			istiod = measuredText(s.MeasuredIstiod)
		}
		p("| %d | %s | %s | %s | %s | %s |\n", k+1, istiod, opt(s.Baseline.LiveHeapBytes, bytesPerMB, 2), opt(s.Baseline.HeapInuseBytes, bytesPerMB, 2),
			opt(s.Baseline.RSSBytes, bytesPerMB, 1), perCells(s.PerRemoteCluster))
	}
	if m, se := cp.BaselineMean, cp.BaselineStdErr; m != nil && se != nil {
		p("| mean ± standard error | | %s | %s | %s | %s |\n", slope(m.LiveHeapBytes, se.LiveHeapBytes, bytesPerMB, 2),
			slope(m.HeapInuseBytes, se.HeapInuseBytes, bytesPerMB, 2), slope(m.RSSBytes, se.RSSBytes, bytesPerMB, 1), perCells(cp.PerRemoteCluster))
	}
	p("\n")
}

// windowText names a window length from the flags, or says it was not recorded.
func windowText(s *float64) string {
	if s == nil {
		return "the settle time (not recorded)"
	}
	return num(*s, 0) + " s"
}

// endpointSlicesText says whether the joined clusters held EndpointSlices, which istiod reads in
// every cluster: with none (no controller-manager) its per-remote cost leaves their structures out.
func endpointSlicesText(cp *report.ControlPlane, setup *report.Setup) string {
	joined := map[string]bool{}
	for _, j := range cp.Joins {
		joined[j.Cluster] = true
	}
	slices, endpoints, counted := 0, 0, 0
	if setup != nil {
		for _, c := range setup.Clusters {
			if joined[c.Name] && c.EndpointSlices != nil && c.Endpoints != nil {
				slices, endpoints, counted = slices+*c.EndpointSlices, endpoints+*c.Endpoints, counted+1
			}
		}
	}
	switch {
	case counted == 0:
		return "EndpointSlices of the joined clusters: not counted (the setup section has no count for them)."
	case endpoints == 0:
		return fmt.Sprintf("The %d joined clusters held no EndpointSlices (no controller-manager): istiod's endpoint structures are not in these figures.", counted)
	default:
		return fmt.Sprintf("EndpointSlices present: the %d joined clusters held %d EndpointSlices with %d endpoints (%d per cluster), which istiod reads in every remote.",
			counted, slices, endpoints, endpoints/counted)
	}
}

// closestText says which per-remote memory measure comes closest to the published figure, with
// how many ztunnel-like clients the istiod served: the published page does not say how it
// measured memory.
func closestText(cp *report.ControlPlane, published float64) string {
	pr := cp.PerRemoteCluster
	measures := []struct {
		name string
		v    *float64
	}{{"RSS", pr.RSSBytes.ValueOf()}, {"the working set", pr.WorkingSetBytes.ValueOf()}, {"heap in use", pr.HeapInuseBytes.ValueOf()}, {"live heap", pr.LiveHeapBytes.ValueOf()}}
	best, bestDist := -1, 0.0
	var absent []string
	for k, m := range measures {
		if m.v == nil {
			absent = append(absent, m.name)
			continue
		}
		if d := math.Abs(*m.v - published); best < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best < 0 {
		return "No memory measure per remote cluster to set beside the published one."
	}
	m := measures[best]
	out := fmt.Sprintf("Of the memory measures per remote cluster, %s comes closest to the published %s MB: %s MB (%s%% of it), with %d ztunnel-like xDS clients on the measured istiod (`-join.xds-clients`).",
		m.name, num(published/bytesPerMB, 0), num(*m.v/bytesPerMB, 1), num(100**m.v/published, 0), cp.XDSClients)
	if len(absent) > 0 {
		out += " Not measured: " + strings.Join(absent, ", ") + " (the working set needs an istiod in a memory cgroup of its own: the local provider's, run as root)."
	}
	return out
}

// xdsKinds are the client kinds of Join.XDS, in column order, with their column names.
var xdsKinds = []struct{ kind, name string }{
	{report.ClientZtunnel, "ztunnel"}, {report.ClientEastWest, "East-west gateway"}, {report.ClientWaypoint, "Waypoint"},
}

// xdsPushes is the table of what the observed istiod pushed the framework's clients during each
// join, when any join counted them.
func xdsPushes(b *bytes.Buffer, joins []report.Join) {
	counted := map[string]int{}
	for _, j := range joins {
		for kind, x := range j.XDS {
			counted[kind] = max(counted[kind], x.Clients)
		}
	}
	if len(counted) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	var heads, clients []string
	for _, k := range xdsKinds {
		heads = append(heads, k.name)
		if n, ok := counted[k.kind]; ok {
			clients = append(clients, fmt.Sprintf("%d %s", n, strings.ToLower(k.name)))
		}
	}
	p("### xDS pushes during each join\n\n")
	p("What the observed istiod pushed the framework's own xDS clients of it (%s) from just before the remote secret to the settle point: "+
		"responses (each acknowledged), resources, and message bytes (KB = 10^3 bytes), each kind's clients together. "+
		"A kind Istio's own proxies serve instead is not counted (-).\n\n", strings.Join(clients, ", "))
	p("| Remote clusters | Cluster | %s | Envoy pushes by type |\n|---|---|%s---|\n", strings.Join(heads, " | "), strings.Repeat("---|", len(heads)))
	for _, j := range joins {
		var cells []string
		envoy := map[string]report.XDSCount{}
		for _, k := range xdsKinds {
			x, ok := j.XDS[k.kind]
			if !ok {
				cells = append(cells, missingCellValue)
				continue
			}
			cells = append(cells, fmt.Sprintf("%d pushes, %d resources, %s KB", x.Pushes, x.Resources, num(float64(x.Bytes)/1e3, 1)))
			if k.kind != report.ClientZtunnel {
				for t, c := range x.ByType {
					e := envoy[t]
					envoy[t] = report.XDSCount{Pushes: e.Pushes + c.Pushes, Resources: e.Resources + c.Resources, Bytes: e.Bytes + c.Bytes}
				}
			}
		}
		var byType []string
		for _, t := range slices.Sorted(maps.Keys(envoy)) {
			byType = append(byType, fmt.Sprintf("%s %d (%s KB)", t, envoy[t].Pushes, num(float64(envoy[t].Bytes)/1e3, 1)))
		}
		types := missingCellValue
		if len(byType) > 0 {
			types = strings.Join(byType, ", ")
		}
		p("| %d | %s | %s | %s |\n", j.RemoteClusters, cell(j.Cluster), strings.Join(cells, " | "), cell(types))
	}
	p("\n")
}

// istiodClients is the table of the clients each istiod served.
func istiodClients(b *bytes.Buffer, cs []report.IstiodClients) {
	if len(cs) == 0 {
		return
	}
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("### xDS clients of each istiod\n\n")
	p("The clients each istiod served once every cluster had joined, as its /debug/adsz lists them: ztunnels and ztunnel-like clients (the data plane's included), east-west gateways' and waypoints' Envoys (told apart by the gateway.istio.io/managed label istiod reads), and any other proxy.\n\n")
	p("| istiod | ztunnel | East-west gateway | Waypoint | Other |\n|---|---|---|---|---|\n")
	for _, c := range cs {
		p("| %s | %d | %d | %d | %d |\n", cell(c.Istiod), c.Ztunnel, c.EastWest, c.Waypoint, c.Other)
	}
	p("\n")
}
