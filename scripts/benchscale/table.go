package main

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/report"
)

// row is what one size measured; nil is not measured.
type row struct {
	clusters int
	wall     time.Duration
	scale    string

	setupS, crdsS, apiReadyS     *float64
	perClusterMB, uniqueMB       *float64
	peakGB, podsPerS             *float64
	rssPerRemoteMB, livePerRemMB *float64
	growthCPU, growthConv        *report.Line
	firstConv, lastConv          *float64
	firstCPU, lastCPU            *float64
}

func rowOf(n int, wall time.Duration, r *report.Report) row {
	out := row{clusters: n, wall: wall}
	if r.Scale != nil {
		out.scale = fmt.Sprintf("%d services, %d pods", r.Scale.ServicesPerCluster, r.Scale.PodsPerCluster)
	}
	if s := r.Setup; s != nil {
		out.setupS, out.crdsS, out.apiReadyS = &s.TotalSeconds, s.CRDsEstablishedSeconds, s.APIServersReadySeconds
		out.perClusterMB, out.uniqueMB = scaled(s.PerClusterRSSBytes, 1e6), scaled(s.PerClusterUniqueBytes, 1e6)
		out.peakGB = scaled(s.PeakHostMemoryBytes, 1e9)
		if s.Workloads != nil {
			out.podsPerS = s.Workloads.PodsPerSecond
		}
	}
	if cp := r.ControlPlane; cp != nil {
		if pr := cp.PerRemoteCluster; pr != nil {
			out.rssPerRemoteMB, out.livePerRemMB = scaled(pr.RSSBytes.ValueOf(), 1e6), scaled(pr.LiveHeapBytes.ValueOf(), 1e6)
		}
		if g := cp.JoinGrowth; g != nil {
			out.growthCPU, out.growthConv = g.JoinCPUSeconds, g.ConvergenceSeconds
		}
		if len(cp.Joins) > 0 {
			first, last := cp.Joins[0], cp.Joins[len(cp.Joins)-1]
			out.firstConv, out.lastConv = first.ConvergenceSeconds, last.ConvergenceSeconds
			out.firstCPU, out.lastCPU = first.JoinCPUSeconds, last.JoinCPUSeconds
		}
	}
	return out
}

func scaled(v *float64, by float64) *float64 {
	if v == nil {
		return nil
	}
	x := *v / by
	return &x
}

func num(v *float64, format string) string {
	if v == nil {
		return "not measured"
	}
	return fmt.Sprintf(format, *v)
}

func pair(a, b *float64, format string) string {
	if a == nil && b == nil {
		return "not measured"
	}
	return num(a, format) + " / " + num(b, format)
}

func fit(l *report.Line, unit string) string {
	if l == nil {
		return "no joins"
	}
	s := fmt.Sprintf("%.2f + %.3f·k %s", l.Intercept, l.Slope, unit)
	if l.SlopeStdErr != nil {
		s += fmt.Sprintf(" (slope ±%.3f, %d joins)", *l.SlopeStdErr, l.N)
	} else {
		s += fmt.Sprintf(" (%d joins, no error estimate)", l.N)
	}
	return s
}

func markdown(rows []row, suiteFlags []string) []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Scale on one host: the local provider at %d sizes\n\n", len(rows))
	p("Each size: `go test ./suites/multicluster -clusters=N -mesh.istiods=observed -run TestControlPlaneJoin %s`. ", strings.Join(suiteFlags, " "))
	p("Memory per cluster is the API server and its share of the one etcd (unique: the binary's pages counted once). ")
	p("The fits are each join's own cost against k, the remote clusters already joined (k = 0 is the first join).\n\n")
	p("| Clusters | Scale | Wall | Setup s (API servers ready / CRDs Established) | MB per cluster (RSS / unique) | Peak host GB | Pods/s | istiod per remote: RSS / live heap MB | Join CPU-s first / last | k-th join CPU-s | Convergence s first / last | k-th join converges in |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		p("| %d | %s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.clusters, r.scale, r.wall.Round(time.Second), num(r.setupS, "%.1f"), pair(r.apiReadyS, r.crdsS, "%.1f"),
			pair(r.perClusterMB, r.uniqueMB, "%.0f"), num(r.peakGB, "%.2f"), num(r.podsPerS, "%.0f"),
			pair(r.rssPerRemoteMB, r.livePerRemMB, "%.1f"), pair(r.firstCPU, r.lastCPU, "%.2f"), fit(r.growthCPU, "CPU-s"),
			pair(r.firstConv, r.lastConv, "%.2f"), fit(r.growthConv, "s"))
	}
	p("\nbenchstat's table of every size's bench lines: benchstat.txt; each size's report: clusters-N/report.md.\n")
	return b.Bytes()
}
