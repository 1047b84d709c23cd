package svg

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ambientmc/ambientmc/framework/report"
)

// Names of the chart files in a report directory.
const (
	ControlPlaneFile = "controlplane.svg"
	LatencyFile      = "latency.svg"
	// ChurnFile is the chart of propagation latency against churn rate.
	ChurnFile = "churn.svg"
	// RotationFile charts the rotation check: istiod live heap and goroutines against rotations.
	RotationFile = "rotation.svg"
)

// bytesPerMB is the decimal MB of the published 180 MB (180000000 bytes).
const bytesPerMB = 1e6

// DrawsControlPlane says whether ControlPlane draws a chart for cp (report.md links only to
// the charts there are): it needs joins.
func DrawsControlPlane(cp *report.ControlPlane) bool { return cp != nil && len(cp.Joins) > 0 }

// DrawsLatency says whether Latency draws a chart for l: it needs runs.
func DrawsLatency(l *report.Latency) bool { return l != nil && len(l.Runs)+len(l.HarnessFloor) > 0 }

// DrawsChurn says whether Churn draws a chart for c: it needs a run with a latency.
func DrawsChurn(c *report.Churn) bool {
	if c == nil {
		return false
	}
	for _, r := range c.Runs {
		if r.P50Ms != nil {
			return true
		}
	}
	return false
}

// Churn charts p50 and p99 propagation latency against rate, one series per case and mode (of
// the windows sized by duration), or returns nil when no run has a latency.
func Churn(c *report.Churn) []byte {
	if !DrawsChurn(c) {
		return nil
	}
	var names []string
	bySeries := map[string]*[2]series{}
	for _, r := range c.Runs {
		if r.P50Ms == nil || r.PercentOfPods != nil {
			continue
		}
		name := r.Where + " " + r.Mode
		s, ok := bySeries[name]
		if !ok {
			s = &[2]series{{name: name}, {name: name}}
			bySeries[name] = s
			names = append(names, name)
		}
		s[0].points = append(s[0].points, point{r.RatePodsPerSecond, *r.P50Ms})
		s[1].points = append(s[1].points, point{r.RatePodsPerSecond, *r.P99Ms})
	}
	slices.Sort(names)
	p50 := panel{title: "propagation latency p50 (" + c.ObservedIstiod + ")", xLabel: "churn rate, pods/s per churned cluster", yLabel: "ms"}
	p99 := panel{title: "propagation latency p99", xLabel: p50.xLabel, yLabel: "ms"}
	for _, n := range names {
		p50.series = append(p50.series, bySeries[n][0])
		p99.series = append(p99.series, bySeries[n][1])
	}
	return linePanels([]panel{p50, p99})
}

// Rotation charts live heap and goroutines against rotations, or returns nil without a
// rotation check.
func Rotation(cs []report.IstiodCheck) []byte {
	for _, c := range cs {
		r := c.Rotation
		if r == nil || len(r.Points) == 0 {
			continue
		}
		heap, gr := series{name: "live heap"}, series{name: "goroutines"}
		for _, p := range r.Points {
			heap.points = append(heap.points, point{float64(p.Rotations), p.LiveHeapBytes / bytesPerMB})
			gr.points = append(gr.points, point{float64(p.Rotations), p.Goroutines})
		}
		const x = "remote-secret rotations"
		return linePanels([]panel{
			{title: "istiod live heap against rotations", xLabel: x, yLabel: "MB", series: []series{heap}},
			{title: "istiod goroutines against rotations", xLabel: x, yLabel: "goroutines", series: []series{gr}},
		})
	}
	return nil
}

// ControlPlane charts istiod's memory and CPU against joined remote clusters, or returns nil
// when there are no joins.
func ControlPlane(cp *report.ControlPlane) []byte {
	if !DrawsControlPlane(cp) {
		return nil
	}
	// Levels start at the baseline (0 remote clusters); the join cost has no baseline point.
	level := func(name string, get func(report.Sample) *float64, scale float64) series {
		s := series{name: name}
		add := func(x int, v *float64) {
			if v != nil {
				s.points = append(s.points, point{float64(x), *v / scale})
			}
		}
		add(0, get(cp.Baseline))
		for _, j := range cp.Joins {
			add(j.RemoteClusters, get(j.Sample))
		}
		return s
	}
	perJoin := func(name string, get func(report.Join) *float64) series {
		s := series{name: name}
		for _, j := range cp.Joins {
			if v := get(j); v != nil {
				s.points = append(s.points, point{float64(j.RemoteClusters), *v})
			}
		}
		return s
	}
	joinCPU := perJoin("join CPU-seconds", func(j report.Join) *float64 { return j.JoinCPUSeconds })
	const x = "joined remote clusters"
	panels := []panel{
		{title: "istiod memory (" + cp.ObservedIstiod + ")", xLabel: x, yLabel: "MB", series: []series{
			level("RSS", func(s report.Sample) *float64 { return s.RSSBytes }, bytesPerMB),
			level("heap in use", func(s report.Sample) *float64 { return s.HeapInuseBytes }, bytesPerMB),
			level("live heap", func(s report.Sample) *float64 { return s.LiveHeapBytes }, bytesPerMB),
		}},
		{title: "istiod CPU rate", xLabel: x, yLabel: "CPU cores", series: []series{
			level("blended CPU", func(s report.Sample) *float64 { return s.CPUCores }, 1),
			level("steady CPU", func(s report.Sample) *float64 { return s.SteadyCPUCores }, 1),
		}},
		{title: "istiod CPU per join", xLabel: x, yLabel: "CPU-seconds", series: []series{joinCPU}},
		{title: "time to converge per join", xLabel: x, yLabel: "seconds", series: []series{
			perJoin("convergence", func(j report.Join) *float64 { return j.ConvergenceSeconds }),
			perJoin("remote synced", func(j report.Join) *float64 { return j.SyncSeconds }),
		}},
	}
	return linePanels(panels)
}

// Latency draws grouped bars of avg/p50/p90/p99 per path and connection mode, or returns nil
// when there are no runs.
func Latency(l *report.Latency) []byte {
	if !DrawsLatency(l) {
		return nil
	}
	runs := append(slices.Clone(l.Runs), l.HarnessFloor...)
	stats := []struct {
		name string
		get  func(report.LatencyRun) float64
	}{
		{"avg", func(r report.LatencyRun) float64 { return r.AvgMs }},
		{"p50", func(r report.LatencyRun) float64 { return r.P50Ms }},
		{"p90", func(r report.LatencyRun) float64 { return r.P90Ms }},
		{"p99", func(r report.LatencyRun) float64 { return r.P99Ms }},
	}
	var maxY float64
	for _, r := range runs {
		for _, s := range stats {
			maxY = max(maxY, s.get(r))
		}
	}
	height := panelHeight + 40
	plotW := chartWidth - marginLeft - marginRight
	plotH := height - marginTop - marginBottom - 20 // two-line group labels
	yStep := niceStep(maxY / 5)
	yTop := math.Ceil(maxY/yStep) * yStep
	if yTop <= 0 {
		yTop = yStep
	}
	sy := func(y float64) float64 { return marginTop + plotH - y/yTop*plotH }

	var b bytes.Buffer
	svgOpen(&b, chartWidth, height)
	axes(&b, "latency by path and connection mode", "path / connections", "ms", plotW, plotH, yStep, yTop)
	groupW := plotW / float64(len(runs))
	barW := groupW * 0.8 / float64(len(stats))
	for g, r := range runs {
		x0 := marginLeft + float64(g)*groupW + groupW*0.1
		for i, s := range stats {
			v := s.get(r)
			fmt.Fprintf(&b, `<rect class="bar" data-series="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s %s %s: %s ms</title></rect>`+"\n",
				s.name, f1(x0+float64(i)*barW), f1(sy(v)), f1(barW), f1(sy(0)-sy(v)), palette[i%len(palette)],
				esc(r.Path), esc(r.Connections), s.name, strconv.FormatFloat(v, 'g', 4, 64))
		}
		cx := f1(x0 + groupW*0.4)
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" font-size="11">%s</text>`+"\n", cx, f1(marginTop+plotH+16), esc(r.Path))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" font-size="11">%s</text>`+"\n", cx, f1(marginTop+plotH+30), esc(r.Connections))
	}
	for i, s := range stats {
		legendEntry(&b, i, s.name, palette[i%len(palette)], false)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
