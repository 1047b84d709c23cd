package report

// Setup holds environment start-up timings; not in the base schema (an extra section).
type Setup struct {
	Clusters     []ClusterSetup `json:"clusters,omitempty"`
	TotalSeconds float64        `json:"totalSeconds"`
	// PeakHostMemoryBytes is the most host memory in use (MemTotal - MemAvailable) seen during
	// the run, sampled every second.
	PeakHostMemoryBytes *float64 `json:"peakHostMemoryBytes,omitempty"`
	// TestProcessPeakRSSBytes is the test process's own peak RSS (its xDS clients, informers and
	// load generators), part of the host peak above.
	TestProcessPeakRSSBytes *float64 `json:"testProcessPeakRSSBytes,omitempty"`
	// Workloads is how fast the scale workloads were created.
	Workloads *WorkloadSetup `json:"workloads,omitempty"`
	// Certificates is what giving the scale pods their certificates from istiod's CA cost.
	Certificates *CertificateSetup `json:"certificates,omitempty"`
	// APIServersReadySeconds and CRDsEstablishedSeconds count from the start of cluster creation
	// until every API server was ready, and until every CRD was Established in every cluster.
	APIServersReadySeconds *float64 `json:"apiServersReadySeconds,omitempty"`
	CRDsEstablishedSeconds *float64 `json:"crdsEstablishedSeconds,omitempty"`
	// Shared lists processes that serve every cluster (e.g. one etcd), each once; every cluster's
	// RSSBytes holds its share (RSS / clusters) under the process name + "-share".
	Shared []SharedProcess `json:"shared,omitempty"`
	// PerClusterRSSBytes is the mean over clusters of their RSSBytes sums (own processes plus
	// shares) at the end of setup.
	PerClusterRSSBytes *float64 `json:"perClusterRSSBytes,omitempty"`
	// PerClusterUniqueBytes is the same memory with the binary's file pages, which every process
	// of one binary shares through the page cache, counted once per binary rather than per process.
	PerClusterUniqueBytes *float64 `json:"perClusterUniqueBytes,omitempty"`
	// WatchedOnly says which clusters were built lighter because the run's only istiod merely
	// watches them (-mesh.istiods=observed), and what was left out of them.
	WatchedOnly *WatchedOnlySetup `json:"watchedOnly,omitempty"`
	// StartWaves are the groups of clusters the provider started together (local), in order.
	StartWaves []StartWave `json:"startWaves,omitempty"`
}

// WatchedOnlySetup is the clusters an istiod only watches and each cut made in them.
type WatchedOnlySetup struct {
	Clusters int      `json:"clusters"`
	Cuts     []string `json:"cuts"`
}

// StartWave is one group of clusters started together: when it began and when its last cluster
// was ready, in seconds from the start of the first.
type StartWave struct {
	Clusters     []string `json:"clusters"`
	StartSeconds float64  `json:"startSeconds"`
	ReadySeconds float64  `json:"readySeconds"`
}

// WorkloadSetup says whether creating the scale workloads was limited by the API servers (as it
// should be) or by the test process.
type WorkloadSetup struct {
	// Seconds runs from the first cluster's workloads to the last's: where clusters start in
	// waves, the first begin as soon as their cluster is ready, while later ones start.
	Seconds float64 `json:"seconds"`
	// PodsPerSecond is how fast the clusters that were written through the API got their pods,
	// all together (absent when every cluster was restored).
	PodsPerSecond *float64 `json:"podsPerSecond,omitempty"`
	// RestoredClusters counts the clusters that started holding their workloads, restored from a
	// snapshot an earlier run with the same inputs wrote (ClusterSetup.RestoredFrom).
	RestoredClusters int `json:"restoredClusters,omitempty"`
	// ClientWaits and ClientWaitSeconds count the client-side rate limiter's waits (0: it never throttled).
	ClientWaits       int64   `json:"clientWaits"`
	ClientWaitSeconds float64 `json:"clientWaitSeconds"`
	// TestProcessCPUCores is the test process's own CPU use from the first cluster's workloads to
	// the end of the step.
	TestProcessCPUCores *float64 `json:"testProcessCPUCores,omitempty"`
}

// CertificateSetup is the setup step in which a ztunnel's certificate client on each fake node
// asked its cluster's istiod for the certificate of every scale pod there, one per identity per
// node as ztunnel keeps them (clusters with an istiod; the provider stands in for the ztunnels).
type CertificateSetup struct {
	// Seconds is the step, until every cluster's scale pods had their certificates.
	Seconds  float64 `json:"seconds"`
	Clusters int     `json:"clusters"`
	Nodes    int     `json:"nodes"`
	Pods     int     `json:"pods"`
	// Certificates held at the end of the step; FailedRequests the requests istiod's CA refused
	// or left unanswered, each retried.
	Certificates   int   `json:"certificates"`
	FailedRequests int64 `json:"failedRequests"`
	// TTLSeconds is the lifetime asked for (certificates are renewed at half of it).
	TTLSeconds float64 `json:"ttlSeconds"`
	// IstiodCPUSeconds is the CPU the istiods used over the step, summed.
	IstiodCPUSeconds *float64 `json:"istiodCPUSeconds,omitempty"`
	// TestProcessCPUCores is the test process's own CPU use over the step (keys, CSRs, TLS).
	TestProcessCPUCores *float64 `json:"testProcessCPUCores,omitempty"`
	// WithoutIstiod names the clusters whose pods got no certificate: they run no istiod
	// (-mesh.istiods=observed). In a mesh their ztunnels would ask a primary's istiod.
	WithoutIstiod []string `json:"withoutIstiod,omitempty"`
}

// IstiodCSRs are istiod's own CA counters (citadel_server_csr_count,
// citadel_server_success_cert_issuance_count): CSRs received and certificates signed.
type IstiodCSRs struct {
	Received float64 `json:"received"`
	Issued   float64 `json:"issued"`
}

// SharedProcess is one process that serves several clusters.
type SharedProcess struct {
	Name     string  `json:"name"`
	RSSBytes float64 `json:"rssBytes"`
	Clusters int     `json:"clusters"`
	// DatabaseBytes is an etcd's database file size, where known.
	DatabaseBytes *float64 `json:"databaseBytes,omitempty"`
}

// ClusterSetup is one cluster's start-up: seconds until ready and the RSS of each process kind
// (e.g. "etcd", "kube-apiserver", "istiod").
type ClusterSetup struct {
	Name         string             `json:"name"`
	ReadySeconds float64            `json:"readySeconds"`
	RSSBytes     map[string]float64 `json:"rssBytes,omitempty"`
	// PodsPerSecond is how fast this cluster's scale pods were created (absent when restored).
	PodsPerSecond *float64 `json:"podsPerSecond,omitempty"`
	// RestoredFrom names the snapshot this cluster's workloads were restored from.
	RestoredFrom string `json:"restoredFrom,omitempty"`
	// CPUSeconds is the CPU time each process kind had used by the end of setup (local).
	CPUSeconds map[string]float64 `json:"cpuSeconds,omitempty"`
	// EndpointSlices and Endpoints count the scale services' EndpointSlices and the endpoints in
	// them once the EndpointSlice controller had published every scale pod.
	EndpointSlices *int `json:"endpointSlices,omitempty"`
	Endpoints      *int `json:"endpoints,omitempty"`
	// CSRs is what this cluster's istiod counted by the end of the certificate step, since it
	// started (absent where it runs none).
	CSRs *IstiodCSRs `json:"csrs,omitempty"`
}
