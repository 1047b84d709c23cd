// Package reporttest builds reports that fill the schema, for the tests of the report packages
// and of their callers, as net/http/httptest serves the tests of HTTP code, and finds what a
// rendering of them lacks.
package reporttest

import (
	"math"
	"strings"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
)

// Full fills the control plane, latency, setup and warnings with every optional number, so key
// checks see the whole of those sections.
func Full() *report.Report {
	r := report.New(report.ProviderLocal)
	r.DataPlane = report.DataPlaneEmulated
	r.Istio = "v0.0.0-20260827124520-eed52ebb66ad"
	r.Kubernetes = "v1.36.1"
	r.Istiod = &report.IstiodBuild{Version: "v0.0.0-20260826214018-9739e10eb9d7", Binary: "/cache/pilot-discovery-0123/pilot-discovery",
		SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", GoVersion: "go1.26.8",
		VersionOutput: `client version: version.BuildInfo{Version:"1.30-dev"}`, ReplacedPins: []string{"istio.io/api v1.30.4-0.20260824163423-69099aec2678 => v1.30.8"}}
	r.Host = report.Host{CPUs: 2, MemoryBytes: 8 << 30}
	r.Topology = report.Topology{Clusters: []report.TopologyCluster{
		{Name: "cluster-1", Network: "network-1", Primary: true},
		{Name: "cluster-2", Network: "network-2", Primary: true},
		{Name: "cluster-3", Network: "network-3", Primary: true},
	}}
	r.Scale = &report.Scale{ServicesPerCluster: 300, PodsPerCluster: 4000}
	// schedstat (1 ns) over a 62 s blended and a 30 s steady window.
	sample := func(cpu, steady, rss, heap, live float64) report.Sample {
		return report.Sample{CPUCores: report.F(cpu), CPUCoresResolution: report.F(1e-9 / 62), SteadyCPUCores: report.F(steady), SteadyCPUCoresResolution: report.F(1e-9 / 30),
			RSSBytes: report.F(rss), HeapInuseBytes: report.F(heap), LiveHeapBytes: report.F(live), WorkingSetBytes: report.F(0.9 * rss)}
	}
	r.ControlPlane = &report.ControlPlane{
		ObservedIstiod:       "cluster-1",
		Istiods:              report.IstiodsAll,
		CPUSource:            "schedstat",
		CPUResolutionSeconds: report.F(1e-9),
		SettleSeconds:        report.F(60),
		SteadyWindowSeconds:  report.F(30),
		Baseline:             sample(0.01, 0.0002, 150e6, 90e6, 45e6),
		Joins: []report.Join{
			{Cluster: "cluster-2", RemoteClusters: 1, SyncSeconds: report.F(0.61), XDSSeconds: report.F(2.1), ConvergenceSeconds: report.F(2.1),
				JoinCPUSeconds: report.F(3.1), JoinCPUSecondsResolution: report.F(1e-9), Sample: sample(0.03, 0.0004, 270e6, 175e6, 92e6)},
			{Cluster: "cluster-3", RemoteClusters: 2, Criterion: report.CriterionSplitHorizon, SyncSeconds: report.F(0.55), XDSSeconds: report.F(1.9), ConvergenceSeconds: report.F(2.0),
				JoinCPUSeconds: report.F(2.9), JoinCPUSecondsResolution: report.F(1e-9), Sample: sample(0.02, 0.0006, 390e6, 260e6, 140e6)},
		},
		Leaves: []report.Leave{{Cluster: "cluster-3", RemoteClusters: 1, Seconds: report.F(1.2), RSSBytes: report.F(300e6), LiveHeapBytes: report.F(95e6), ManagedRemoteClusters: 1}},
	}
	analysis.FillDeltas(r.ControlPlane)
	if err := analysis.FitPerRemote(r.ControlPlane); err != nil {
		panic(err)
	}
	r.Latency = &report.Latency{
		Runs: []report.LatencyRun{
			{Path: report.PathLocal, Connections: report.ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.8, P50Ms: 0.7, P90Ms: 1.1, P99Ms: 2.0, HostCPUBusy: 0.4},
			{Path: report.PathCrossCluster, Connections: report.ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, Errors: 1, AvgMs: 2.8, P50Ms: 2.5, P90Ms: 3.6, P99Ms: 6.1, HostCPUBusy: 0.5},
			{Path: report.PathLocal, Connections: report.ConnReused, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.2, P50Ms: 0.18, P90Ms: 0.3, P99Ms: 0.6, HostCPUBusy: 0.3},
			{Path: report.PathCrossCluster, Connections: report.ConnReused, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.35, P50Ms: 0.3, P90Ms: 0.5, P99Ms: 0.9, HostCPUBusy: 0.3},
		},
		HarnessFloor: []report.LatencyRun{
			{Path: report.PathDirect, Connections: report.ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.1, P50Ms: 0.09, P90Ms: 0.15, P99Ms: 0.3, HostCPUBusy: 0.2},
		},
		HostCPUSaturated: true,
	}
	r.Latency.Overhead = analysis.ComputeOverhead(r.Latency.Runs)
	r.Warnings = []string{"host has 2 CPUs; CPU figures are noisy"}
	r.Setup = &report.Setup{TotalSeconds: 12.3, Clusters: []report.ClusterSetup{
		{Name: "cluster-1", ReadySeconds: 4.2, RSSBytes: map[string]float64{"etcd": 40e6, "kube-apiserver": 300e6, "istiod": 150e6}},
	}}
	return r
}

// Every is Full with every other section filled too (churn, checks, gates, profiles,
// plan, failover, images, artifacts, the whole setup) and one non-finite value of each kind, so
// that a golden copy of what render.Write writes covers every renderer and the NaN scrubbing.
func Every() *report.Report {
	r := Full()
	r.NodeImage = "kindest/node:v1.36.1"
	r.Topology.Clusters[1].Platform, r.Topology.Clusters[1].PlatformFrom = "gke", "-istio.platform"
	r.IstioImages = []report.IstioImage{{Cluster: "cluster-1", Component: "ztunnel", Image: "h/ztunnel:t", ImageID: "h/ztunnel@sha256:bbb"}}
	cp := r.ControlPlane
	cp.XDSClients = 2
	cp.SettleRule = "CPU back in its idle band"
	cp.MeasuredIstiod = &report.MeasuredIstiod{Cluster: "cluster-1", HeldBefore: 2, Restarted: true}
	cp.LeaveIstiod = &report.MeasuredIstiod{Cluster: "cluster-1", Note: "the one the joins measured"}
	cp.Joins[0].SettleSeconds, cp.Joins[0].SettleCapped, cp.Joins[0].HostCPUBusy = report.F(12), true, report.F(0.4)
	cp.Joins[1].Criterion = report.CriterionPodWorkloads
	cp.Joins[0].XDS = map[string]report.XDSReceived{
		report.ClientZtunnel:  {Clients: 2, Pushes: 4, Resources: 42, Bytes: 21000, ByType: map[string]report.XDSCount{"wds": {Pushes: 4, Resources: 42, Bytes: 21000}}},
		report.ClientEastWest: {Clients: 1, Pushes: 5, Resources: 61, Bytes: 30500, ByType: map[string]report.XDSCount{"cds": {Pushes: 2, Resources: 20, Bytes: 12000}, "eds": {Pushes: 1, Resources: 20, Bytes: 8500}, "wds": {Pushes: 2, Resources: 21, Bytes: 10000}}},
	}
	cp.Clients = []report.IstiodClients{{Istiod: "cluster-1", Ztunnel: 5, EastWest: 1, Waypoint: 2}, {Istiod: "cluster-2", Ztunnel: 2, EastWest: 1, Other: 1}}
	analysis.FitJoinGrowth(cp)
	l := r.Latency
	l.Runs = append(l.Runs, report.LatencyRun{Path: report.PathSameNetwork, Connections: report.ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 1.4, P50Ms: 1.2, P90Ms: 2, P99Ms: 3.5})
	l.SameNetworkOverhead = analysis.ComputeOverheadOf(l.Runs, report.PathSameNetwork)
	l.RateSearch = &report.RateSearch{QPS: 100, Rule: "the rule", Steps: []report.RateStep{
		{QPS: 100, AchievedQPS: 99.5, HostCPUBusy: 0.5, Accepted: true}, {QPS: 200, AchievedQPS: 150, HostCPUBusy: 0.97, Reason: "only 75% of the rate got through"}}}
	r.Failover = &report.Failover{Service: "echo-failover", Target: "cluster-2", Relation: "other-network", FailoverSeconds: 1.25, FailbackSeconds: 0.5,
		Requests: 400, FailedRequests: 3, ResolutionSeconds: 0.05}
	r.IstiodChecks = []report.IstiodCheck{
		{Name: "memory comes back", Result: report.CheckKnownIssue, Reference: "istio/istio#61263", Detail: "krt collections\n120 to 180", IstiodVersion: "1.30-dev",
			Rotation: &report.RotationFigures{Points: []report.RotationPoint{{Rotations: 0, Mode: "in-place", LiveHeapBytes: 40e6, Goroutines: 900}, {Rotations: 10, Mode: "recreate", LiveHeapBytes: 42e6, Goroutines: 905}},
				LiveHeapSlopeBytes: report.F(2e5), LiveHeapSlopeStdErr: report.F(1e4), LiveHeapBoundBytes: report.F(5e5), GoroutineSlope: report.F(0.5), GoroutineSlopeStdErr: report.F(0.1), GoroutineBound: report.F(2), RemoteClusterLiveHeap: report.F(45e6)},
			Profiles: []string{"profiles/heap-a.pb.gz"}},
		{Name: "traffic survives a restart", Result: report.CheckPass, Detail: "no gap", Traffic: &report.TrafficFigures{IntervalSeconds: 0.1, Requests: 100, Succeeded: 100, LongestGapSeconds: 0.2},
			ReconvergeSeconds: report.F(1.5), ChangeSeenSeconds: report.F(2.5), Status: &report.StatusFigures{Samples: 20, Disagreements: []string{"0.5 s: said synced"}, AllowedSeconds: 1}},
	}
	r.Churn = Churn().Churn
	r.Churn.MeasuredIstiod = &report.MeasuredIstiod{Cluster: "cluster-1"}
	r.Churn.Runs = append(r.Churn.Runs, report.ChurnRun{Where: report.ChurnAllRemote, Mode: "ready", RatePodsPerSecond: 4, AchievedPodsPerSecond: 3.5, PercentOfPods: report.F(10),
		Clusters: []string{"cluster-2", "cluster-3"}, DurationSeconds: 10, Changes: 10, Samples: 10, Superseded: 1, Lost: 1, P50Ms: report.F(200), P90Ms: report.F(300), P99Ms: report.F(400), MaxMs: report.F(450),
		PushesPerSecondByType: map[string]float64{"wds": math.NaN(), "eds": 2}})
	r.Gates = []report.Gate{
		{Path: "churn.runs[*].lost", Bound: "max 5", Reason: "changes must arrive", Verdict: report.GatePass,
			Values: []report.GateValue{{Path: "churn.runs[0].lost", Number: report.F(0), Pass: true}, {Path: "churn.runs[1].lost", Number: report.F(1), Pass: true}}, Message: "ok"},
		{Path: "Join/perRemote:live-heap-B", Bound: "+10%", Verdict: report.GateFail, Message: "grew", Profiles: []string{"profiles/heap-b.pb.gz"},
			Baseline: &report.GateBaseline{Benchmark: "Join/perRemote", Unit: "live-heap-B", BaseMedian: 45e6, Median: 52e6, Change: report.F(52.0/45 - 1), P: 0.008, Alpha: 0.05, BaseN: 5, N: 5}},
		{Path: "istiodChecks[*].result", Bound: "in [pass known-issue]", Verdict: report.GateNotMeasured, Message: "absent"},
	}
	r.Profiles = []report.Profile{{Istiod: "cluster-1", Kind: "heap", When: "baseline", File: "profiles/heap-a.pb.gz", Seconds: 0.25, Bytes: 12345},
		{Istiod: "cluster-1", Kind: "cpu", When: "after-join-cluster-3", File: "profiles/cpu.pb.gz", Seconds: 10, WaitedSeconds: report.F(2), Bytes: 999}}
	r.Artifacts = &report.Artifacts{Dir: "/artifacts", Logs: "logs", JUnit: "junit.xml", MetricsCSV: "metrics.csv", TestOutput: "test.log"}
	timeout := 1200.0
	r.Plan = &report.Plan{TimeoutSeconds: &timeout, MarginSeconds: report.F(60), TotalSeconds: 900, Warnings: []string{"churn trimmed: -churn.rates=5,10 for the full sweep"},
		Items: []report.PlanItem{{Name: "setup", PlannedSeconds: 120, ActualSeconds: report.F(100.5), Detail: "3 clusters"}, {Name: "TestChurn", PlannedSeconds: 300, Detail: "2 rates", Trimmed: true}}}
	r.Setup = &report.Setup{TotalSeconds: 40, PeakHostMemoryBytes: report.F(6e9), TestProcessPeakRSSBytes: report.F(400e6), APIServersReadySeconds: report.F(12.5), CRDsEstablishedSeconds: report.F(21.25),
		PerClusterRSSBytes: report.F(230e6), PerClusterUniqueBytes: report.F(160e6),
		Workloads: &report.WorkloadSetup{Seconds: 8, PodsPerSecond: report.F(1500), RestoredClusters: 1, ClientWaits: 0, TestProcessCPUCores: report.F(0.7)},
		Certificates: &report.CertificateSetup{Seconds: 0.5, Clusters: 1, Nodes: 3, Pods: 100, Certificates: 60, FailedRequests: 1, TTLSeconds: 86400,
			IstiodCPUSeconds: report.F(0.05), TestProcessCPUCores: report.F(0.6), WithoutIstiod: []string{"cluster-2"}},
		Shared:     []report.SharedProcess{{Name: "etcd", RSSBytes: 150e6, Clusters: 3, DatabaseBytes: report.F(30e6)}},
		StartWaves: []report.StartWave{{Clusters: []string{"cluster-1", "cluster-2"}, StartSeconds: 0, ReadySeconds: 4.5}, {Clusters: []string{"cluster-3"}, StartSeconds: 4.5, ReadySeconds: 7.25}},
		Clusters: []report.ClusterSetup{{Name: "cluster-1", ReadySeconds: 10, RSSBytes: map[string]float64{"kube-apiserver": 180e6, "etcd-share": 50e6, "istiod": math.Inf(1)},
			PodsPerSecond: report.F(500), CPUSeconds: map[string]float64{"kube-apiserver": 24.5}, EndpointSlices: new(300), Endpoints: new(4000),
			CSRs: &report.IstiodCSRs{Received: 61, Issued: 60}},
			{Name: "cluster-2", ReadySeconds: 12, RestoredFrom: "/cache/workload-snapshots/cluster-2-0123456789abcdef.gob.gz (captured 2026-12-05T01:57:55Z)", EndpointSlices: new(300), Endpoints: new(4000)}}}
	r.Failover.FailbackSeconds = math.NaN()                          // a plain field: left out of the JSON, "-" in report.md
	cp.PerRemoteCluster.HeapInuseBytes.StdErr = report.F(math.NaN()) // an optional one: nil
	return r
}

// Churn is a report of the churn suite alone: four windows, two knees and a finding.
func Churn() *report.Report {
	r := report.New(report.ProviderLocal)
	r.Topology = report.Topology{Clusters: []report.TopologyCluster{{Name: "cluster-1"}, {Name: "cluster-2"}, {Name: "cluster-3"}}}
	run := func(where, mode string, rate, p50, p99 float64) report.ChurnRun {
		return report.ChurnRun{Where: where, Mode: mode, RatePodsPerSecond: rate, AchievedPodsPerSecond: rate, Clusters: []string{"cluster-2"},
			DurationSeconds: 20, CostSeconds: 21, Changes: 40, Samples: 80, P50Ms: report.F(p50), P90Ms: report.F(p50 * 1.5), P99Ms: report.F(p99), MaxMs: report.F(p99),
			IstiodCPUCores: report.F(0.03), IstiodCPUResolutionCores: report.F(0.0005), PushesPerSecond: report.F(5), PushesPerSecondByType: map[string]float64{"wds": 5},
			ConnectedXDSClients: report.F(1), CSRs: &report.IstiodCSRs{Received: 3, Issued: 3}, RSSBytes: report.F(160e6), LiveHeapBytes: report.F(27e6)}
	}
	r.Churn = &report.Churn{
		ObservedIstiod: "cluster-1", Clients: 1, LostAfterMs: 15000,
		Debounce: report.ChurnDebounce{AfterMs: 100, MaxMs: 10000},
		Runs: []report.ChurnRun{
			run(report.ChurnLocal, "replace", 2, 110, 130), run(report.ChurnLocal, "replace", 20, 4800, 9900),
			run(report.ChurnOneRemote, "replace", 2, 120, 200), run(report.ChurnOneRemote, "replace", 20, 340, 1000),
		},
		Knee:    []report.ChurnKnee{{Where: report.ChurnLocal, Mode: "replace", BaseRate: 2, BaseP50Ms: 110, RatePodsPerSecond: report.F(20)}, {Where: report.ChurnOneRemote, Mode: "replace", BaseRate: 2, BaseP50Ms: 120}},
		Finding: &report.ChurnFinding{Cluster: "cluster-2", Service: "svc-0", Endpoints: 5, CapacityBefore: 5, CapacityWithOneUnready: 5, CapacityWithAllUnready: 5, UnreadyCountedInCapacity: true, Detail: "unready counted"},
	}
	return r
}

// SharedEtcd is Full with the setup of a run whose one etcd served all three clusters: listed once
// with its database, each cluster carrying its share, and the setup's time breakdown.
func SharedEtcd() *report.Report {
	r := Full()
	r.Setup = &report.Setup{TotalSeconds: 40, APIServersReadySeconds: report.F(12.5), CRDsEstablishedSeconds: report.F(21.25),
		PerClusterRSSBytes: report.F(230e6), PerClusterUniqueBytes: report.F(160e6),
		Shared:   []report.SharedProcess{{Name: "etcd", RSSBytes: 150e6, Clusters: 3, DatabaseBytes: report.F(30e6)}},
		Clusters: []report.ClusterSetup{{Name: "cluster-1", ReadySeconds: 10, RSSBytes: map[string]float64{"kube-apiserver": 180e6, "etcd-share": 50e6}}}}
	return r
}

// StartWaves is Full with the setup of a local run that started its clusters in two waves and
// measured each process's CPU and the published EndpointSlices.
func StartWaves() *report.Report {
	r := Full()
	r.Setup = &report.Setup{TotalSeconds: 40,
		StartWaves: []report.StartWave{{Clusters: []string{"cluster-1", "cluster-2"}, StartSeconds: 0, ReadySeconds: 4.5}, {Clusters: []string{"cluster-3"}, StartSeconds: 4.5, ReadySeconds: 7.25}},
		Clusters: []report.ClusterSetup{{Name: "cluster-1", ReadySeconds: 4, CPUSeconds: map[string]float64{"kube-apiserver": 24.5, "kube-controller-manager": 3.75},
			EndpointSlices: new(300), Endpoints: new(4000)}}}
	return r
}

// Checks are two istiod property checks: a known issue with its reference and a pass.
func Checks() []report.IstiodCheck {
	return []report.IstiodCheck{
		{Name: "memory comes back", Result: report.CheckKnownIssue, Reference: "istio/istio#61263", Detail: "krt collections 120 to 180"},
		{Name: "a deletion mid-sync does not wedge", Result: report.CheckPass, Detail: "canary synced in 0.2s"},
	}
}

// Lacking returns those of wants that text (report.md, a chart's text) does not contain, in order.
func Lacking(text string, wants ...string) []string {
	var lacking []string
	for _, w := range wants {
		if !strings.Contains(text, w) {
			lacking = append(lacking, w)
		}
	}
	return lacking
}
