package report

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// smallScaleMetricCPU is the sample report of issue 10: small scale, CPU from the 10 ms metric
// over a 4 s steady window, so every steady figure is one tick or none.
func smallScaleMetricCPU() *Report {
	r := fullReport()
	r.Scale = &Scale{ServicesPerCluster: 20, PodsPerCluster: 100}
	cp := r.ControlPlane
	cp.CPUSource, cp.CPUResolutionSeconds = "process_cpu_seconds_total", F(0.01)
	cp.SettleSeconds, cp.SteadyWindowSeconds = F(6), F(4)
	set := func(s *Sample, blended float64) {
		s.CPUCores, s.CPUCoresResolution = F(blended), F(0.01/6.3)
		s.SteadyCPUCores, s.SteadyCPUCoresResolution = F(0.0025), F(0.0025)
	}
	set(&cp.Baseline, 0.005)
	for i := range cp.Joins {
		set(&cp.Joins[i].Sample, 0.02)
		cp.Joins[i].JoinCPUSecondsResolution = F(0.01)
	}
	cp.FillDeltas()
	if err := cp.FitPerRemote(); err != nil {
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
	require.NotNil(t, pr.SteadyCPUCoresResolution)
	assert.InDelta(t, 0.0025/2, *pr.SteadyCPUCoresResolution, 1e-15, "one 4 s tick over two remote clusters")
	md := string(Markdown(r))

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
	md := string(Markdown(fullReport()))
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
	assert.NotContains(t, string(Markdown(fullReport())), caveat, "published scale")

	md := string(Markdown(smallScaleMetricCPU()))
	assert.Contains(t, md, caveat+" the published figures are at 300 services and 4000 pods per cluster; "+
		"this run's scale was 20 services and 100 pods per cluster.")
	i, j := strings.Index(md, caveat), strings.Index(md, "| RSS (MB)")
	assert.Less(t, i, j, "the caveat comes before the per-remote figures")

	r := fullReport()
	r.Scale = nil
	assert.Contains(t, string(Markdown(r)), "this run's scale was not recorded")
}

// NaN and Inf, optional or plain, in a struct field or a map: the report is still written, the
// JSON is valid and lacks the value, and a warning names the field.
func TestWriteDropsNonFiniteValuesWithAWarning(t *testing.T) {
	r := fullReport()
	r.ControlPlane.Joins[0].SteadyCPUCores = F(math.NaN())
	r.ControlPlane.PerRemoteCluster.RSSBytes = F(math.Inf(1))
	r.Failover = &Failover{Service: "echo-failover", FailoverSeconds: math.NaN(), FailbackSeconds: 0.17, Requests: 10}
	r.Latency.Runs[1].P99Ms = math.Inf(-1)
	r.Latency.Overhead.New.DeltaMs = math.NaN()
	r.Setup.Clusters[0].RSSBytes["istiod"] = math.NaN()
	dir := t.TempDir()
	require.NoError(t, Write(dir, r))

	b, err := os.ReadFile(filepath.Join(dir, JSONFile))
	require.NoError(t, err)
	require.True(t, json.Valid(b))
	back, err := Read(filepath.Join(dir, JSONFile))
	require.NoError(t, err)
	assert.Nil(t, back.ControlPlane.Joins[0].SteadyCPUCores)
	assert.NotNil(t, back.ControlPlane.Joins[0].CPUCores)
	assert.Nil(t, back.ControlPlane.PerRemoteCluster.RSSBytes)
	assert.NotContains(t, back.Setup.Clusters[0].RSSBytes, "istiod")
	assert.Contains(t, back.Setup.Clusters[0].RSSBytes, "etcd")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	fo := raw["failover"].(map[string]any)
	assert.NotContains(t, fo, "failoverSeconds", "a plain NaN field must be absent, not 0")
	assert.Equal(t, 0.17, fo["failbackSeconds"])
	run := raw["latency"].(map[string]any)["runs"].([]any)[1].(map[string]any)
	assert.NotContains(t, run, "p99Ms")
	assert.Contains(t, run, "p90Ms")
	// Key order survives the removal.
	assert.Less(t, strings.Index(string(b), `"service"`), strings.Index(string(b), `"failbackSeconds"`))

	for _, field := range []string{"controlPlane.joins[0].steadyCPUCores was NaN", "controlPlane.perRemoteCluster.rssBytes was +Inf",
		"failover.failoverSeconds was NaN", "latency.runs[1].p99Ms was -Inf", "setup.clusters[0].rssBytes.istiod was NaN"} {
		assert.True(t, strings.Contains(strings.Join(back.Warnings, "\n"), field), "no warning for %s in %q", field, back.Warnings)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	require.NoError(t, err)
	assert.Contains(t, string(md), "| echo-failover |  |  | - | 0.17 |")
	assert.NotContains(t, string(md), "NaN |")
	assert.NotContains(t, string(md), "Inf |")
	assert.Contains(t, string(md), "| new | - |\n")
	assert.Equal(t, math.Inf(-1), r.Latency.Runs[1].P99Ms, "plain fields are restored after writing")

	// Written again (a partial report, then the final one): each field is named once.
	n := len(r.Warnings)
	require.NoError(t, Write(dir, r))
	assert.Len(t, r.Warnings, n)
}
