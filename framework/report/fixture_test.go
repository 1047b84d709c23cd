package report

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
