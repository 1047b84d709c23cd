package markdown

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

// smallScaleMetricCPU is the sample report of issue 10: small scale, CPU from the 10 ms metric
// over a 4 s steady window, so every steady figure is one tick or none.
func smallScaleMetricCPU() *report.Report {
	r := reporttest.Full()
	r.Scale = &report.Scale{ServicesPerCluster: 20, PodsPerCluster: 100}
	cp := r.ControlPlane
	cp.CPUSource, cp.CPUResolutionSeconds = "process_cpu_seconds_total", report.F(0.01)
	cp.SettleSeconds, cp.SteadyWindowSeconds = report.F(6), report.F(4)
	set := func(s *report.Sample, blended float64) {
		s.CPUCores, s.CPUCoresResolution = report.F(blended), report.F(0.01/6.3)
		s.SteadyCPUCores, s.SteadyCPUCoresResolution = report.F(0.0025), report.F(0.0025)
	}
	set(&cp.Baseline, 0.005)
	for i := range cp.Joins {
		set(&cp.Joins[i].Sample, 0.02)
		cp.Joins[i].JoinCPUSecondsResolution = report.F(0.01)
	}
	analysis.FillDeltas(cp)
	if err := analysis.FitPerRemote(cp); err != nil {
		panic(err)
	}
	return r
}

func mdLine(t *testing.T, md, prefix string) string {
	t.Helper()
	for l := range strings.Lines(md) {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("report.md has no line starting %q:\n%s", prefix, md)
	return ""
}

func TestMarkdownNeverPrintsCPUBelowItsResolution(t *testing.T) {
	r := smallScaleMetricCPU()
	pr := r.ControlPlane.PerRemoteCluster
	require.NotNil(t, pr.SteadyCPUCores.Resolution)
	assert.InDelta(t, 0.0025/2, *pr.SteadyCPUCores.Resolution, 1e-15, "one 4 s tick over two remote clusters")
	md := string(Render(r))

	// A flat series of single ticks fits a slope of 0, which is below what the windows resolve.
	steady := mdLine(t, md, "| Steady CPU")
	assert.Contains(t, steady, "< 0.0013 (below resolution)")
	assert.NotContains(t, steady, "0.00000")
	// The 0.0025-core readings equal their resolution: shown, since they are one tick.
	assert.Contains(t, mdLine(t, md, "| 0 | baseline"), "| 0.00250 |")
	// The join-to-join ΔCPU is 0, within the two readings' resolutions.
	assert.Contains(t, mdLine(t, md, "| 2 | cluster-3"), "< 0.0032 (below resolution)")
	assert.Contains(t, md, "CPU from process_cpu_seconds_total (resolution 0.01 s)")
}

func TestMarkdownSaysWhatEachCPURowMeans(t *testing.T) {
	md := string(Render(reporttest.Full()))
	pub := "0.010 cores (1.0% of a core)"
	blended := mdLine(t, md, "| Blended CPU")
	assert.NotContains(t, blended, pub, "the blended average is set beside the published steady figure")
	assert.Contains(t, blended, "not comparable")
	assert.Contains(t, mdLine(t, md, "| Steady CPU (cores, 30 s window)"), pub)
	assert.Contains(t, mdLine(t, md, "| Join burst CPU (CPU-s per cluster)"), "| - |")
	assert.Contains(t, md, "**Join CPU-s** is the CPU-seconds from just before the remote secret to convergence + 60 s")
	assert.Contains(t, md, "**Steady CPU cores** is the average over the 30 s window")
	assert.Contains(t, mdLine(t, md, "| Remote clusters |"), "| Blended CPU cores | Steady CPU cores |")
	// A schedstat figure is far above its resolution and prints as a number.
	assert.Contains(t, mdLine(t, md, "| 1 | cluster-2"), "| 0.00040 |")
}

func TestMarkdownSaysWhenScalesDiffer(t *testing.T) {
	caveat := "**Scales differ:**"
	assert.NotContains(t, string(Render(reporttest.Full())), caveat, "published scale")

	md := string(Render(smallScaleMetricCPU()))
	assert.Contains(t, md, caveat+" the published figures are at 300 services and 4000 pods per cluster; "+
		"this run's scale was 20 services and 100 pods per cluster.")
	i, j := strings.Index(md, caveat), strings.Index(md, "| RSS (MB)")
	assert.Less(t, i, j, "the caveat comes before the per-remote figures")

	r := reporttest.Full()
	r.Scale = nil
	assert.Contains(t, string(Render(r)), "this run's scale was not recorded")
}
