package markdown

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/reporttest"
)

func TestMarkdown(t *testing.T) {
	md := string(Render(reporttest.Full()))
	assert.Empty(t, reporttest.Lacking(md,
		"# ambientmc report: local provider, emulated data plane",
		EmulatedNote,
		"2 CPUs",
		"300 services, 4000 pods per cluster",
		"| istiod | v0.0.0-20260826214018-9739e10eb9d7 (/cache/pilot-discovery-0123/pilot-discovery, sha256 0123456789ab, go1.26.8); replaced pins: istio.io/api v1.30.4-0.20260824163423-69099aec2678 => v1.30.8 |",
		"| 2 | cluster-3 | split-horizon | 0.55 |",    // joins table
		"| RSS (MB) | 120.0 ± 0.0 | 180 MB |",         // slope beside the published figure
		"0.010 cores (1.0% of a core)",                // published CPU
		"| cluster-3 | 1 | 1.20 | 300.0 | 95.0 | 1 |", // leaves table
		"| new | +2.00 ms (+250%) |",
		"| reused | +0.15 ms (+75%) |",
		"Not comparable with the published figures: the host was saturated",
		"host has 2 CPUs; CPU figures are noisy",
		"](controlplane.svg)",
		"](latency.svg)",
	), "report.md lacks these")
	if strings.Contains(md, "+2.20 ms (+346%)") {
		t.Error("a saturated run's overhead is set beside the published figures")
	}
	calm := reporttest.Full()
	calm.Latency.HostCPUSaturated = false
	calm.Latency.RateSearch = &report.RateSearch{QPS: 400, Rule: "the rule", Steps: []report.RateStep{
		{QPS: 400, AchievedQPS: 399, HostCPUBusy: 0.5, Accepted: true}, {QPS: 700, AchievedQPS: 520, HostCPUBusy: 0.95, Reason: "only 74% of the rate got through"}}}
	assert.Empty(t, reporttest.Lacking(string(Render(calm)),
		"| new | +2.00 ms (+250%) | +2.20 ms (+346%) |",
		"| reused | +0.15 ms (+75%) | +0.13 ms (+72%) |",
		"Request rate: 400.0 QPS, the highest this host carried",
		"| 700.0 | 520.0 | 95% | false | only 74% of the rate got through |",
		"| Connections | Measured (emulated data plane) | Published (ztunnel, Envoy) |",
		"The measured column is the emulated Go data plane's",
	), "unsaturated report.md lacks these")
	calm.DataPlane = report.DataPlaneZtunnel
	onZtunnel := string(Render(calm))
	assert.Contains(t, onZtunnel, "| Connections | Measured (ztunnel data plane) | Published (ztunnel, Envoy) |")
	assert.NotContains(t, onZtunnel, "The measured column is the emulated Go data plane's", "a real data plane's figure is not called emulated")
	r := reporttest.Full()
	r.Provider, r.DataPlane = report.ProviderKind, report.DataPlaneZtunnel
	if md := string(Render(r)); strings.Contains(md, EmulatedNote) || !strings.Contains(md, "kind provider, ztunnel data plane") {
		t.Error("ztunnel report: wrong title or emulated note present")
	}
	r.DataPlane = report.DataPlaneEmulated
	md = string(Render(r))
	assert.Contains(t, md, "kind provider, emulated data plane")
	assert.Contains(t, md, EmulatedNote)
	assert.Contains(t, md, EmulatedOnKindNote, "on kind the note says what around the emulator is real")
	assert.NotContains(t, string(Render(reporttest.Full())), EmulatedOnKindNote, "the local provider's report does not")
}

func TestChurnMarkdownStatesDebounceAndArrival(t *testing.T) {
	md := string(Render(reporttest.Churn()))
	for _, want := range []string{"## Churn", "PILOT_DEBOUNCE_AFTER = 100 ms", "PILOT_DEBOUNCE_MAX = 10000 ms", "arrival",
		"in the test process", "| local | replace | 20.0 |", "### Knee", "none in the sweep", "unready counted", "![propagation latency"} {
		assert.Contains(t, md, want)
	}
}

func TestMarkdownListsIstioImages(t *testing.T) {
	r := &report.Report{IstioImages: []report.IstioImage{{Cluster: "cluster-1", Component: "ztunnel", Image: "h/ztunnel:t", ImageID: "h/ztunnel@sha256:bbb"}}}
	md := string(Render(r))
	assert.Contains(t, md, "## Istio images")
	assert.Contains(t, md, "| cluster-1 | ztunnel | h/ztunnel:t | h/ztunnel@sha256:bbb |")
	assert.NotContains(t, string(Render(&report.Report{})), "## Istio images", "absent when nothing ran from images")
}

func TestIstiodChecks(t *testing.T) {
	r := report.New(report.ProviderLocal)
	assert.NotContains(t, string(Render(r)), "istiod property checks", "absent when no check ran")
	r.IstiodChecks = reporttest.Checks()
	md := string(Render(r))
	assert.Contains(t, md, "| memory comes back | known-issue | istio/istio#61263 | krt collections 120 to 180 |")
	assert.Contains(t, md, "| a deletion mid-sync does not wedge | pass |  | canary synced in 0.2s |")
}

func TestChurnLinksItsChartOnlyWhenDrawn(t *testing.T) {
	r := reporttest.Churn()
	assert.Contains(t, string(Render(r)), "](churn.svg)")
	r.Churn.Runs = []report.ChurnRun{{Where: report.ChurnLocal, Mode: "replace", RatePodsPerSecond: 2, Lost: 3}}
	assert.NotContains(t, string(Render(r)), "churn.svg", "no latency, no chart")
}

// A two-point fit has no standard error: report.md shows it as -, never as 0.
func TestMarkdownShowsAnUnknownStandardErrorAsDash(t *testing.T) {
	cp := &report.ControlPlane{Baseline: report.Sample{RSSBytes: report.F(100)}, Joins: []report.Join{{RemoteClusters: 1, Sample: report.Sample{RSSBytes: report.F(250)}}},
		PerRemoteCluster: &report.PerRemote{RSSBytes: &report.Estimate{Value: 150}}}
	assert.Contains(t, string(Render(&report.Report{Provider: report.ProviderLocal, ControlPlane: cp})), "| RSS (MB) | 0.0 ± - |")
}

func TestMarkdownJoinGrowth(t *testing.T) {
	cp := &report.ControlPlane{JoinGrowth: &report.JoinGrowth{JoinCPUSeconds: &report.Line{Intercept: 2, Slope: 0.5, SlopeStdErr: report.F(0), N: 4},
		ConvergenceSeconds: &report.Line{Intercept: 1.5, N: 2}}}
	md := string(Render(&report.Report{ControlPlane: cp}))
	assert.Contains(t, md, "| Join CPU-s | 2.00 | 0.500 ± 0.000 | 4 |")
	assert.Contains(t, md, "| Convergence s | 1.50 | 0.000 ± - | 2 |", "two joins: no standard error")
	assert.NotContains(t, md, "Remote sync s", "never fitted: no row")
}

// NaN and Inf print as absent ("-"), never as NaN or Inf, whether optional or plain.
func TestMarkdownPrintsNonFiniteAsAbsent(t *testing.T) {
	r := reporttest.Full()
	r.ControlPlane.Joins[0].SteadyCPUCores = report.F(math.NaN())
	r.Failover = &report.Failover{Service: "echo-failover", FailoverSeconds: math.NaN(), FailbackSeconds: 0.17, Requests: 10}
	r.Latency.Runs[1].P99Ms = math.Inf(-1)
	r.Latency.Overhead.New.DeltaMs = math.NaN()
	md := string(Render(r))
	assert.Contains(t, md, "| echo-failover |  |  | - | 0.17 |")
	assert.Contains(t, md, "| new | - |\n")
	assert.Contains(t, md, "| 1 | cluster-2 |  | 0.61 | 2.10 | 2.10 | - | 3.10 | 0.0300 | - |")
	assert.NotContains(t, md, "NaN")
	assert.NotContains(t, md, "Inf")
}

func TestPerRemoteSaysWhetherEndpointSlicesWerePresent(t *testing.T) {
	cp := &report.ControlPlane{Joins: []report.Join{{Cluster: "cluster-2"}, {Cluster: "cluster-3"}}}
	n := func(v int) *int { return &v }
	setup := func(slices, endpoints int) *report.Setup {
		return &report.Setup{Clusters: []report.ClusterSetup{
			{Name: "cluster-1", EndpointSlices: n(99), Endpoints: n(999)}, // the observed one: not a remote
			{Name: "cluster-2", EndpointSlices: n(slices), Endpoints: n(endpoints)},
			{Name: "cluster-3", EndpointSlices: n(slices), Endpoints: n(endpoints)},
		}}
	}
	assert.Contains(t, endpointSlicesText(cp, setup(20, 100)), "EndpointSlices present: the 2 joined clusters held 40 EndpointSlices with 200 endpoints (100 per cluster)")
	assert.Contains(t, endpointSlicesText(cp, setup(0, 0)), "held no EndpointSlices")
	assert.Contains(t, endpointSlicesText(cp, nil), "not counted")
}

func TestMarkdownSaysPerRemoteErrorsAreOverSequences(t *testing.T) {
	seq := func(base, slope float64) report.JoinSequence {
		return report.JoinSequence{MeasuredIstiod: &report.MeasuredIstiod{Cluster: "cluster-1", HeldBefore: 2, Restarted: true},
			Baseline:         report.Sample{LiveHeapBytes: report.F(base)},
			PerRemoteCluster: &report.PerRemote{LiveHeapBytes: &report.Estimate{Value: slope, StdErr: report.F(0.25e6)}, StdErrOf: report.StdErrOfFit}}
	}
	cp := &report.ControlPlane{Sequences: []report.JoinSequence{seq(20.5e6, 3.96e6), seq(20.6e6, 4.06e6)},
		BaselineMean: &report.Sample{LiveHeapBytes: report.F(20.55e6)}, BaselineStdErr: &report.Sample{LiveHeapBytes: report.F(0.05e6)},
		PerRemoteCluster: &report.PerRemote{LiveHeapBytes: &report.Estimate{Value: 4.01e6, StdErr: report.F(0.05e6)}, StdErrOf: report.StdErrOfSequences}}
	md := string(Render(&report.Report{ControlPlane: cp}))
	assert.Contains(t, md, "Mean of 2 join sequences' least-squares slopes")
	assert.Contains(t, md, "| Live heap (MB) | 4.01 ± 0.05 | - |")
	assert.Contains(t, md, "| 2 | cluster-1, restarted fresh for this (it had held 2 remote clusters) | 20.60 | - | - | 4.06 ± 0.25 |")
	assert.Contains(t, md, "| mean ± standard error | | 20.55 ± 0.05 | - | - | 4.01 ± 0.05 |")

	cp.Sequences, cp.PerRemoteCluster.StdErrOf = nil, report.StdErrOfFit
	md = string(Render(&report.Report{ControlPlane: cp}))
	assert.Contains(t, md, "`-join.repeats=3` measures three sequences")
	assert.NotContains(t, md, "Join sequences")
}
