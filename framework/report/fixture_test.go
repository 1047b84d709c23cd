package report

import "math"

// fullReport fills every section and every optional number, so key checks see the whole schema.
func fullReport() *Report {
	r := New(ProviderLocal)
	r.DataPlane = DataPlaneEmulated
	r.Istio = "v0.0.0-20260827124520-eed52ebb66ad"
	r.Kubernetes = "v1.36.1"
	r.Istiod = &Istiod{Version: "v0.0.0-20260826214018-9739e10eb9d7", Binary: "/cache/pilot-discovery-0123/pilot-discovery",
		SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", GoVersion: "go1.26.8",
		VersionOutput: `client version: version.BuildInfo{Version:"1.30-dev"}`, ReplacedPins: []string{"istio.io/api v1.30.4-0.20260824163423-69099aec2678 => v1.30.8"}}
	r.Host = Host{CPUs: 2, MemoryBytes: 8 << 30}
	r.Topology = Topology{Clusters: []TopologyCluster{
		{Name: "cluster-1", Network: "network-1", Primary: true},
		{Name: "cluster-2", Network: "network-2", Primary: true},
		{Name: "cluster-3", Network: "network-3", Primary: true},
	}}
	r.Scale = &Scale{ServicesPerCluster: 300, PodsPerCluster: 4000}
	// schedstat (1 ns) over a 62 s blended and a 30 s steady window.
	sample := func(cpu, steady, rss, heap, live float64) Sample {
		return Sample{CPUCores: F(cpu), CPUCoresResolution: F(1e-9 / 62), SteadyCPUCores: F(steady), SteadyCPUCoresResolution: F(1e-9 / 30),
			RSSBytes: F(rss), HeapInuseBytes: F(heap), LiveHeapBytes: F(live)}
	}
	r.ControlPlane = &ControlPlane{
		ObservedIstiod:       "cluster-1",
		Istiods:              IstiodsAll,
		CPUSource:            "schedstat",
		CPUResolutionSeconds: F(1e-9),
		SettleSeconds:        F(60),
		SteadyWindowSeconds:  F(30),
		Baseline:             sample(0.01, 0.0002, 150e6, 90e6, 45e6),
		Joins: []Join{
			{Cluster: "cluster-2", RemoteClusters: 1, SyncSeconds: F(0.61), XDSSeconds: F(2.1), ConvergenceSeconds: F(2.1),
				JoinCPUSeconds: F(3.1), JoinCPUSecondsResolution: F(1e-9), Sample: sample(0.03, 0.0004, 270e6, 175e6, 92e6)},
			{Cluster: "cluster-3", RemoteClusters: 2, Criterion: CriterionSplitHorizon, SyncSeconds: F(0.55), XDSSeconds: F(1.9), ConvergenceSeconds: F(2.0),
				JoinCPUSeconds: F(2.9), JoinCPUSecondsResolution: F(1e-9), Sample: sample(0.02, 0.0006, 390e6, 260e6, 140e6)},
		},
		Leaves: []Leave{{Cluster: "cluster-3", RemoteClusters: 1, Seconds: F(1.2), RSSBytes: F(300e6), LiveHeapBytes: F(95e6), ManagedRemoteClusters: 1}},
	}
	r.ControlPlane.FillDeltas()
	if err := r.ControlPlane.FitPerRemote(); err != nil {
		panic(err)
	}
	r.Latency = &Latency{
		Runs: []LatencyRun{
			{Path: PathLocal, Connections: ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.8, P50Ms: 0.7, P90Ms: 1.1, P99Ms: 2.0, HostCPUBusy: 0.4},
			{Path: PathCrossCluster, Connections: ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, Errors: 1, AvgMs: 2.8, P50Ms: 2.5, P90Ms: 3.6, P99Ms: 6.1, HostCPUBusy: 0.5},
			{Path: PathLocal, Connections: ConnReused, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.2, P50Ms: 0.18, P90Ms: 0.3, P99Ms: 0.6, HostCPUBusy: 0.3},
			{Path: PathCrossCluster, Connections: ConnReused, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.35, P50Ms: 0.3, P90Ms: 0.5, P99Ms: 0.9, HostCPUBusy: 0.3},
		},
		HarnessFloor: []LatencyRun{
			{Path: PathDirect, Connections: ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 0.1, P50Ms: 0.09, P90Ms: 0.15, P99Ms: 0.3, HostCPUBusy: 0.2},
		},
		HostCPUSaturated: true,
	}
	r.Latency.Overhead = ComputeOverhead(r.Latency.Runs)
	r.Warnings = []string{"host has 2 CPUs; CPU figures are noisy"}
	r.Setup = &Setup{TotalSeconds: 12.3, Clusters: []ClusterSetup{
		{Name: "cluster-1", ReadySeconds: 4.2, RSSBytes: map[string]float64{"etcd": 40e6, "kube-apiserver": 300e6, "istiod": 150e6}},
	}}
	return r
}

// everyReport is fullReport with every other section filled too (churn, checks, gates, profiles,
// plan, failover, images, artifacts, the whole setup) and one non-finite value of each kind, so
// that a golden copy of what Write writes covers every renderer and the NaN scrubbing.
func everyReport() *Report {
	r := fullReport()
	r.NodeImage = "kindest/node:v1.36.1"
	r.Topology.Clusters[1].Platform, r.Topology.Clusters[1].PlatformFrom = "gke", "-istio.platform"
	r.IstioImages = []IstioImage{{Cluster: "cluster-1", Component: "ztunnel", Image: "h/ztunnel:t", ImageID: "h/ztunnel@sha256:bbb"}}
	cp := r.ControlPlane
	cp.XDSClients = 2
	cp.SettleRule = "CPU back in its idle band"
	cp.MeasuredIstiod = &MeasuredIstiod{Cluster: "cluster-1", HeldBefore: 2, Restarted: true}
	cp.LeaveIstiod = &MeasuredIstiod{Cluster: "cluster-1", Note: "the one the joins measured"}
	cp.Joins[0].SettleSeconds, cp.Joins[0].SettleCapped, cp.Joins[0].HostCPUBusy = F(12), true, F(0.4)
	cp.Joins[1].Criterion = CriterionPodWorkloads
	cp.FitJoinGrowth()
	l := r.Latency
	l.Runs = append(l.Runs, LatencyRun{Path: PathSameNetwork, Connections: ConnNew, QPS: 100, DurationSeconds: 30, Requests: 3000, AvgMs: 1.4, P50Ms: 1.2, P90Ms: 2, P99Ms: 3.5})
	l.SameNetworkOverhead = ComputeOverheadOf(l.Runs, PathSameNetwork)
	l.Runs = l.Runs[:4] // Validate knows local and cross-cluster runs only
	l.RateSearch = &RateSearch{QPS: 100, Rule: "the rule", Steps: []RateStep{
		{QPS: 100, AchievedQPS: 99.5, HostCPUBusy: 0.5, Accepted: true}, {QPS: 200, AchievedQPS: 150, HostCPUBusy: 0.97, Reason: "only 75% of the rate got through"}}}
	r.Failover = &Failover{Service: "echo-failover", Target: "cluster-2", Relation: "other-network", FailoverSeconds: 1.25, FailbackSeconds: 0.5,
		Requests: 400, FailedRequests: 3, ResolutionSeconds: 0.05}
	r.IstiodChecks = []IstiodCheck{
		{Name: "memory comes back", Result: CheckKnownIssue, Reference: "istio/istio#61263", Detail: "krt collections\n120 to 180", IstiodVersion: "1.30-dev",
			Rotation: &RotationFigures{Points: []RotationPoint{{Rotations: 0, Mode: "in-place", LiveHeapBytes: 40e6, Goroutines: 900}, {Rotations: 10, Mode: "recreate", LiveHeapBytes: 42e6, Goroutines: 905}},
				LiveHeapSlopeBytes: F(2e5), LiveHeapSlopeStdErr: F(1e4), LiveHeapBoundBytes: F(5e5), GoroutineSlope: F(0.5), GoroutineSlopeStdErr: F(0.1), GoroutineBound: F(2), RemoteClusterLiveHeap: F(45e6)},
			Profiles: []string{"profiles/heap-a.pb.gz"}},
		{Name: "traffic survives a restart", Result: CheckPass, Detail: "no gap", Traffic: &TrafficFigures{IntervalSeconds: 0.1, Requests: 100, Succeeded: 100, LongestGapSeconds: 0.2},
			ReconvergeSeconds: F(1.5), ChangeSeenSeconds: F(2.5), Status: &StatusFigures{Samples: 20, Disagreements: []string{"0.5 s: said synced"}, AllowedSeconds: 1}},
	}
	r.Churn = churnReport().Churn
	r.Churn.MeasuredIstiod = &MeasuredIstiod{Cluster: "cluster-1"}
	r.Churn.Runs = append(r.Churn.Runs, ChurnRun{Where: ChurnAllRemote, Mode: "ready", RatePodsPerSecond: 4, AchievedPodsPerSecond: 3.5, PercentOfPods: F(10),
		Clusters: []string{"cluster-2", "cluster-3"}, DurationSeconds: 10, Changes: 10, Samples: 10, Superseded: 1, Lost: 1, P50Ms: F(200), P90Ms: F(300), P99Ms: F(400), MaxMs: F(450),
		PushesPerSecondByType: map[string]float64{"wds": math.NaN(), "eds": 2}})
	r.Gates = []Gate{
		{Path: "churn.runs[*].lost", Bound: "max 5", Reason: "changes must arrive", Verdict: GatePass,
			Values: []GateValue{{Path: "churn.runs[0].lost", Number: F(0), Pass: true}, {Path: "churn.runs[1].lost", Number: F(1), Pass: true}}, Message: "ok"},
		{Path: "Join/perRemote:live-heap-B", Bound: "+10%", Verdict: GateFail, Message: "grew", Profiles: []string{"profiles/heap-b.pb.gz"},
			Baseline: &GateBaseline{Benchmark: "Join/perRemote", Unit: "live-heap-B", BaseMedian: 45e6, Median: 52e6, Change: F(52.0/45 - 1), P: 0.008, Alpha: 0.05, BaseN: 5, N: 5}},
		{Path: "istiodChecks[*].result", Bound: "in [pass known-issue]", Verdict: GateNotMeasured, Message: "absent"},
	}
	r.Profiles = []Profile{{Istiod: "cluster-1", Kind: "heap", When: "baseline", File: "profiles/heap-a.pb.gz", Seconds: 0.25, Bytes: 12345},
		{Istiod: "cluster-1", Kind: "cpu", When: "after-join-cluster-3", File: "profiles/cpu.pb.gz", Seconds: 10, WaitedSeconds: F(2), Bytes: 999}}
	r.Artifacts = &Artifacts{Dir: "/artifacts", Logs: "logs", JUnit: "junit.xml", MetricsCSV: "metrics.csv", TestOutput: "test.log"}
	timeout := 1200.0
	r.Plan = &Plan{TimeoutSeconds: &timeout, MarginSeconds: F(60), TotalSeconds: 900, Warnings: []string{"churn trimmed: -churn.rates=5,10 for the full sweep"},
		Items: []PlanItem{{Name: "setup", PlannedSeconds: 120, ActualSeconds: F(100.5), Detail: "3 clusters"}, {Name: "TestChurn", PlannedSeconds: 300, Detail: "2 rates", Trimmed: true}}}
	r.Setup = &Setup{TotalSeconds: 40, PeakHostMemoryBytes: F(6e9), TestProcessPeakRSSBytes: F(400e6), APIServersReadySeconds: F(12.5), CRDsEstablishedSeconds: F(21.25),
		PerClusterRSSBytes: F(230e6), PerClusterUniqueBytes: F(160e6),
		Workloads:  &WorkloadSetup{Seconds: 8, PodsPerSecond: 1500, ClientWaits: 0, TestProcessCPUCores: F(0.7)},
		Shared:     []SharedProcess{{Name: "etcd", RSSBytes: 150e6, Clusters: 3, DatabaseBytes: F(30e6)}},
		StartWaves: []StartWave{{Clusters: []string{"cluster-1", "cluster-2"}, StartSeconds: 0, ReadySeconds: 4.5}, {Clusters: []string{"cluster-3"}, StartSeconds: 4.5, ReadySeconds: 7.25}},
		Clusters: []ClusterSetup{{Name: "cluster-1", ReadySeconds: 10, RSSBytes: map[string]float64{"kube-apiserver": 180e6, "etcd-share": 50e6, "istiod": math.Inf(1)},
			PodsPerSecond: F(500), CPUSeconds: map[string]float64{"kube-apiserver": 24.5}, EndpointSlices: new(300), Endpoints: new(4000)}}}
	r.Failover.FailbackSeconds = math.NaN()                  // a plain field: left out of the JSON, "-" in report.md
	cp.PerRemoteCluster.HeapInuseBytesStdErr = F(math.NaN()) // an optional one: nil
	return r
}
