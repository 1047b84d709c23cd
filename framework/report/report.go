// Package report is the report.json schema of DESIGN.md: a run's results as types, their JSON
// (JSON, Read) and their validation. What is derived from the measurements (slopes, deltas,
// overheads) is package analysis; report.md, the charts and bench.txt are packages markdown, svg
// and bench, and render writes them all into a report directory.
//
// Absent, never zero-filled: a section a run did not produce is a nil pointer or empty slice and is
// left out of the JSON. Inside controlPlane every measured number is a *float64 for the same reason:
// a zero can be a real reading (a steady CPU that rounds to 0, a delta of 0), so "not measured" must
// be nil (use F to set a value). Identifiers and counts (cluster, remoteClusters) are plain values,
// and latency runs use plain numbers because a finished run always yields all of them.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// SchemaVersion is the report.json schema this package writes and reads.
const SchemaVersion = 1

// Providers, data planes and other enumerated values of the schema.
const (
	ProviderLocal = "local"
	ProviderKind  = "kind"
	ProviderKube  = "kube"

	DataPlaneEmulated = "emulated"
	DataPlaneZtunnel  = "ztunnel"

	IstiodsAll      = "all"
	IstiodsObserved = "observed"

	PathLocal = "local"
	// PathSameNetwork is another cluster on the client's network: single HBONE to the pod's node.
	PathSameNetwork = "same-network"
	// PathCrossCluster is a cluster on another network: double HBONE through its east-west
	// gateway, the path of the published figures.
	PathCrossCluster = "cross-cluster"
	PathDirect       = "direct" // harness floor: fortio client straight to server, no data plane

	ConnNew    = "new"
	ConnReused = "reused"
)

// Report is the content of report.json.
type Report struct {
	SchemaVersion int    `json:"schemaVersion"`
	Provider      string `json:"provider"`
	// DataPlane is "emulated" or "ztunnel"; empty (and absent) when no data plane ran.
	DataPlane    string        `json:"dataPlane,omitempty"`
	Istio        string        `json:"istio,omitempty"`
	Istiod       *Istiod       `json:"istiod,omitempty"`
	Kubernetes   string        `json:"kubernetes,omitempty"`
	Host         Host          `json:"host"`
	Topology     Topology      `json:"topology"`
	Scale        *Scale        `json:"scale,omitempty"`
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
	Latency      *Latency      `json:"latency,omitempty"`
	IstiodChecks []IstiodCheck `json:"istiodChecks,omitempty"`
	Churn        *Churn        `json:"churn,omitempty"` // churn.go
	Reference    Reference     `json:"reference"`

	// Not in DESIGN.md's schema; extra keys a reader may ignore.
	Warnings []string  `json:"warnings,omitempty"`
	Plan     *Plan     `json:"plan,omitempty"`
	Setup    *Setup    `json:"setup,omitempty"`
	Failover *Failover `json:"failover,omitempty"`

	// NodeImage is the kind node image, where the kind provider ran.
	NodeImage string `json:"nodeImage,omitempty"`
	// IstioImages are the images the Istio components ran, with the digests the nodes resolved
	// (kind, kube).
	IstioImages []IstioImage `json:"istioImages,omitempty"`

	// CI verdicts and artifacts (ci.go): the -gates bounds as judged, the istiod profiles kept,
	// and where the run's other artifacts are.
	Gates     []Gate     `json:"gates,omitempty"`
	Profiles  []Profile  `json:"profiles,omitempty"`
	Artifacts *Artifacts `json:"artifacts,omitempty"`
}

// Plan is the run's time plan, worked out before anything started, beside what each part took.
type Plan struct {
	// TimeoutSeconds is go test's -timeout and MarginSeconds what the plan kept free before it;
	// both absent when the run had no timeout.
	TimeoutSeconds *float64   `json:"timeoutSeconds,omitempty"`
	MarginSeconds  *float64   `json:"marginSeconds,omitempty"`
	TotalSeconds   float64    `json:"totalSeconds"`
	Items          []PlanItem `json:"items"`
	// Warnings say what was trimmed to fit and which flag gives the full version.
	Warnings []string `json:"warnings,omitempty"`
}

// PlanItem is one setup step or top-level test: planned, and what it took (absent when it did
// not run to its end).
type PlanItem struct {
	Name           string   `json:"name"`
	PlannedSeconds float64  `json:"plannedSeconds"`
	ActualSeconds  *float64 `json:"actualSeconds,omitempty"`
	Detail         string   `json:"detail,omitempty"`
	Trimmed        bool     `json:"trimmed,omitempty"`
}

// Istiod says which pilot-discovery ran: built from an istio.io/istio module version (-istiod.version
// or the pinned default) or given as a binary (-istiod.binary).
type Istiod struct {
	Version       string   `json:"version,omitempty"` // istio.io/istio module version; absent when unknown
	Binary        string   `json:"binary"`
	SHA256        string   `json:"sha256"`
	VersionOutput string   `json:"versionOutput,omitempty"` // what `pilot-discovery version` printed
	ReplacedPins  []string `json:"replacedPins,omitempty"`  // "module pin => replacement" of its wrapper module
	GoVersion     string   `json:"goVersion,omitempty"`
}

// Failover records how traffic to a service with local and remote endpoints moved to the remote
// cluster when the local endpoints became unready, and back when they recovered.
type Failover struct {
	Service string `json:"service"`
	// Target is the cluster traffic failed over to, Relation how the client reaches it
	// (same-network or other-network).
	Target          string  `json:"target,omitempty"`
	Relation        string  `json:"relation,omitempty"`
	FailoverSeconds float64 `json:"failoverSeconds"`
	FailbackSeconds float64 `json:"failbackSeconds"`
	Requests        int64   `json:"requests"`
	FailedRequests  int64   `json:"failedRequests"`
	// ResolutionSeconds is the interval between requests: the times are only as fine as that.
	ResolutionSeconds float64 `json:"resolutionSeconds"`
}

// IstioImage is one Istio component's image in one cluster.
type IstioImage struct {
	Cluster   string `json:"cluster"`
	Component string `json:"component"`
	Image     string `json:"image"`
	ImageID   string `json:"imageID,omitempty"`
}

// Host describes the machine the run used.
type Host struct {
	CPUs        int    `json:"cpus"`
	MemoryBytes uint64 `json:"memoryBytes"`
}

// Topology lists the clusters of the run.
type Topology struct {
	Clusters []TopologyCluster `json:"clusters"`
}

// TopologyCluster is one cluster of the topology.
type TopologyCluster struct {
	Name    string `json:"name"`
	Network string `json:"network"`
	Primary bool   `json:"primary"`
	// Platform is the Istio platform the cluster was installed with (kube: -istio.platform or
	// what the cluster showed), PlatformFrom what chose it; absent when none.
	Platform     string `json:"platform,omitempty"`
	PlatformFrom string `json:"platformFrom,omitempty"`
}

// Scale is the scale workload each cluster carried.
type Scale struct {
	ServicesPerCluster int `json:"servicesPerCluster"`
	PodsPerCluster     int `json:"podsPerCluster"`
}

// ControlPlane holds the observed istiod's cost as clusters join (and leave).
type ControlPlane struct {
	ObservedIstiod string `json:"observedIstiod"`
	// Istiods is "all" or "observed": whether the other istiods ran during the joins.
	Istiods string `json:"istiods"`
	// XDSClients is how many ztunnel-like delta xDS clients the observed istiod served during
	// the joins (push cost grows with connected clients).
	XDSClients int `json:"xdsClients,omitempty"`
	// CPUSource names where the CPU figures come from ("schedstat": nanoseconds;
	// "process_cpu_seconds_total": 10 ms ticks), CPUResolutionSeconds its step.
	CPUSource            string   `json:"cpuSource,omitempty"`
	CPUResolutionSeconds *float64 `json:"cpuResolutionSeconds,omitempty"`
	// SettleSeconds is the wait after convergence before sampling: fixed by -join.settle, or
	// (absent) per join until istiod's CPU is back in its idle band (each join's settleSeconds),
	// as SettleRule says. The blended CPU window runs from just before the step to the settle
	// point; SteadyWindowSeconds is the length of the steady window that ends there.
	SettleSeconds       *float64 `json:"settleSeconds,omitempty"`
	SettleRule          string   `json:"settleRule,omitempty"`
	SteadyWindowSeconds *float64 `json:"steadyWindowSeconds,omitempty"`
	// MeasuredIstiod is the istiod the joins measured; LeaveIstiod the one the leaves did.
	MeasuredIstiod *MeasuredIstiod `json:"measuredIstiod,omitempty"`
	LeaveIstiod    *MeasuredIstiod `json:"leaveIstiod,omitempty"`

	Baseline         Sample     `json:"baseline"`
	Joins            []Join     `json:"joins,omitempty"`
	PerRemoteCluster *PerRemote `json:"perRemoteCluster,omitempty"`
	// JoinGrowth fits each join's own cost against the clusters already joined: whether a join
	// gets dearer as the mesh grows.
	JoinGrowth *JoinGrowth `json:"joinGrowth,omitempty"`
	Leaves     []Leave     `json:"leaves,omitempty"` // not in DESIGN.md; extra
}

// Sample is istiod's state once settled; nil fields were not measured.
//
// CPUCores is the blended average from just before the step to convergence plus the settle time
// (join burst and steady use mixed); SteadyCPUCores the average over the steady window. Each
// ...Resolution is the smallest rate its window can show (the CPU source's step over the
// window's length): a figure below it is not resolved.
type Sample struct {
	CPUCores                 *float64 `json:"cpuCores,omitempty"`
	CPUCoresResolution       *float64 `json:"cpuCoresResolution,omitempty"`
	SteadyCPUCores           *float64 `json:"steadyCPUCores,omitempty"`
	SteadyCPUCoresResolution *float64 `json:"steadyCPUCoresResolution,omitempty"`
	RSSBytes                 *float64 `json:"rssBytes,omitempty"`
	HeapInuseBytes           *float64 `json:"heapInuseBytes,omitempty"`
	LiveHeapBytes            *float64 `json:"liveHeapBytes,omitempty"`
}

// MeasuredIstiod says which istiod a section measured and what it had held before: a figure
// "from nothing" needs one that held no remote cluster (istiod keeps part of a cluster's memory
// after it leaves), so a suite restarts it fresh when it had.
type MeasuredIstiod struct {
	Cluster string `json:"cluster"`
	// HeldBefore is how many remote clusters it had held since its start when the section began.
	HeldBefore int `json:"heldBefore"`
	// Restarted says it was restarted for the section, so it held nothing when measured.
	Restarted bool   `json:"restarted,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Join criteria: what a ztunnel-like client of the observed istiod must hold of the joined cluster.
const (
	// CriterionSplitHorizon: a cluster on another network; one split-horizon workload per global
	// service, capacities summing to its pods, via its east-west gateway.
	CriterionSplitHorizon = "split-horizon"
	// CriterionPodWorkloads: a cluster on the observed cluster's own network; every scale pod as a
	// workload with its own address.
	CriterionPodWorkloads = "pod-workloads"
)

// Join is one cluster joining; RemoteClusters is the count of remote clusters after it joined.
type Join struct {
	Cluster        string `json:"cluster"`
	RemoteClusters int    `json:"remoteClusters"`
	// Criterion is what the join waited for (CriterionSplitHorizon or CriterionPodWorkloads).
	Criterion string `json:"criterion,omitempty"`
	// SettleSeconds is how long after convergence the memory samples began; SettleCapped says the
	// settle ended at its cap rather than with istiod's CPU back in its idle band.
	SettleSeconds      *float64 `json:"settleSeconds,omitempty"`
	SettleCapped       bool     `json:"settleCapped,omitempty"`
	SyncSeconds        *float64 `json:"syncSeconds,omitempty"`
	XDSSeconds         *float64 `json:"xdsSeconds,omitempty"`
	ConvergenceSeconds *float64 `json:"convergenceSeconds,omitempty"`
	JoinCPUSeconds     *float64 `json:"joinCPUSeconds,omitempty"`
	// JoinCPUSecondsResolution is the CPU source's step: JoinCPUSeconds is known to within it.
	JoinCPUSecondsResolution *float64 `json:"joinCPUSecondsResolution,omitempty"`
	// HostCPUBusy is the share of all host CPUs in use from the secret write to the settle point.
	HostCPUBusy *float64 `json:"hostCPUBusy,omitempty"`
	Sample
	DeltaCPUCores       *float64 `json:"deltaCPUCores,omitempty"`
	DeltaRSSBytes       *float64 `json:"deltaRSSBytes,omitempty"`
	DeltaHeapInuseBytes *float64 `json:"deltaHeapInuseBytes,omitempty"`
	DeltaLiveHeapBytes  *float64 `json:"deltaLiveHeapBytes,omitempty"`
}

// JoinGrowth says "the k-th join costs a + b·k", k being the remote clusters already joined,
// for each per-join cost; a nil line could not be fitted (fewer than two joins measured it).
type JoinGrowth struct {
	JoinCPUSeconds     *Line `json:"joinCPUSeconds,omitempty"`
	ConvergenceSeconds *Line `json:"convergenceSeconds,omitempty"`
	SyncSeconds        *Line `json:"syncSeconds,omitempty"`
}

// Line is a least-squares fit y = intercept + slope·x over n points; the slope's standard error
// is absent below three points.
type Line struct {
	Intercept   float64  `json:"intercept"`
	Slope       float64  `json:"slope"`
	SlopeStdErr *float64 `json:"slopeStdErr,omitempty"`
	N           int      `json:"n"`
}

// PerRemote holds least-squares slopes per remote cluster over baseline + joins, each with its
// standard error. A nil slope could not be fitted (fewer than two measured points); a nil
// standard error could not be estimated (fewer than three: two points leave no residual). Each
// ...Resolution is the slope of one resolution step across the fitted range of remote clusters:
// a slope below it is not resolved.
type PerRemote struct {
	CPUCoresResolution       *float64 `json:"cpuCoresResolution,omitempty"`
	SteadyCPUCoresResolution *float64 `json:"steadyCPUCoresResolution,omitempty"`
	JoinCPUSecondsResolution *float64 `json:"joinCPUSecondsResolution,omitempty"`

	CPUCores             *float64 `json:"cpuCores,omitempty"`
	CPUCoresStdErr       *float64 `json:"cpuCoresStdErr,omitempty"`
	SteadyCPUCores       *float64 `json:"steadyCPUCores,omitempty"`
	SteadyCPUCoresStdErr *float64 `json:"steadyCPUCoresStdErr,omitempty"`
	JoinCPUSeconds       *float64 `json:"joinCPUSeconds,omitempty"`
	JoinCPUSecondsStdErr *float64 `json:"joinCPUSecondsStdErr,omitempty"`
	RSSBytes             *float64 `json:"rssBytes,omitempty"`
	RSSBytesStdErr       *float64 `json:"rssBytesStdErr,omitempty"`
	HeapInuseBytes       *float64 `json:"heapInuseBytes,omitempty"`
	HeapInuseBytesStdErr *float64 `json:"heapInuseBytesStdErr,omitempty"`
	LiveHeapBytes        *float64 `json:"liveHeapBytes,omitempty"`
	LiveHeapBytesStdErr  *float64 `json:"liveHeapBytesStdErr,omitempty"`
}

// Leave is one cluster leaving; RemoteClusters is the count of remote clusters after it left, and
// ManagedRemoteClusters what istiod itself reported managing afterwards.
type Leave struct {
	Cluster               string   `json:"cluster"`
	RemoteClusters        int      `json:"remoteClusters"`
	Seconds               *float64 `json:"seconds,omitempty"`
	RSSBytes              *float64 `json:"rssBytes,omitempty"`
	LiveHeapBytes         *float64 `json:"liveHeapBytes,omitempty"`
	ManagedRemoteClusters int      `json:"managedRemoteClusters"`
}

// Latency holds the latency suite's runs.
type Latency struct {
	Runs []LatencyRun `json:"runs,omitempty"`
	// Overhead is cross-cluster (another network) against local, set beside the published
	// figures; SameNetworkOverhead is same-network against local, which they do not cover.
	Overhead            *Overhead `json:"overhead,omitempty"`
	SameNetworkOverhead *Overhead `json:"sameNetworkOverhead,omitempty"`
	// HarnessFloor are runs on path "direct" (no data plane): the latency of the harness itself.
	HarnessFloor []LatencyRun `json:"harnessFloor,omitempty"`
	// HostCPUSaturated is set when the host's CPUs were busy enough to distort the latencies, or
	// a run fell short of its requested rate; the overhead is then not comparable with published
	// figures.
	HostCPUSaturated bool `json:"hostCPUSaturated,omitempty"`
	// RateSearch says how the request rate was chosen.
	RateSearch *RateSearch `json:"rateSearch,omitempty"`
}

// RateSearch is how the latency suite chose its request rate: probe steps at rising rates, keeping
// the highest this host carried, or the rate -latency.qps forced.
type RateSearch struct {
	QPS    float64    `json:"qps"`
	Forced bool       `json:"forced,omitempty"`
	Steps  []RateStep `json:"steps,omitempty"`
	// Rule is the acceptance rule the steps were judged by.
	Rule string `json:"rule,omitempty"`
}

// RateStep is one probe of the rate search.
type RateStep struct {
	QPS         float64 `json:"qps"`
	AchievedQPS float64 `json:"achievedQps"`
	HostCPUBusy float64 `json:"hostCPUBusy,omitempty"`
	Accepted    bool    `json:"accepted"`
	Reason      string  `json:"reason,omitempty"`
}

// LatencyRun is one fortio run.
type LatencyRun struct {
	Path            string  `json:"path"`        // local, cross-cluster or direct
	Connections     string  `json:"connections"` // new or reused
	QPS             float64 `json:"qps"`
	DurationSeconds float64 `json:"durationSeconds"`
	Requests        int64   `json:"requests"`
	Errors          int64   `json:"errors"`
	AvgMs           float64 `json:"avgMs"`
	P50Ms           float64 `json:"p50Ms"`
	P90Ms           float64 `json:"p90Ms"`
	P99Ms           float64 `json:"p99Ms"`
	// HostCPUBusy is the fraction (0..1) of all host CPUs busy during the run; 0 means unmeasured.
	HostCPUBusy float64 `json:"hostCPUBusy,omitempty"`
}

// Overhead is cross-cluster minus local average latency per connection mode; nil when a pair is missing.
type Overhead struct {
	New    *Delta `json:"new,omitempty"`
	Reused *Delta `json:"reused,omitempty"`
}

// Delta is a latency difference in milliseconds and as a percent of the local latency.
type Delta struct {
	DeltaMs float64 `json:"deltaMs"`
	Percent float64 `json:"percent"`
}

// Reference holds the published figures a run is compared with.
type Reference struct {
	PerRemoteClusterCPUCores    float64 `json:"perRemoteClusterCPUCores"`
	PerRemoteClusterMemoryBytes float64 `json:"perRemoteClusterMemoryBytes"`
	NewConnOverheadMs           float64 `json:"newConnOverheadMs"`
	NewConnOverheadPercent      float64 `json:"newConnOverheadPercent"`
	ReusedConnOverheadMs        float64 `json:"reusedConnOverheadMs"`
	ReusedConnOverheadPercent   float64 `json:"reusedConnOverheadPercent"`
	// Scale is the per-cluster scale the published figures were measured at (not in DESIGN.md).
	Scale Scale `json:"scale"`
}

// Published returns the published reference figures.
func Published() Reference {
	return Reference{
		PerRemoteClusterCPUCores:    0.01,
		PerRemoteClusterMemoryBytes: 180000000,
		NewConnOverheadMs:           2.2,
		NewConnOverheadPercent:      346,
		ReusedConnOverheadMs:        0.13,
		ReusedConnOverheadPercent:   72,
		Scale:                       Scale{ServicesPerCluster: 300, PodsPerCluster: 4000},
	}
}

// F returns a pointer to v, for the optional numbers.
func F(v float64) *float64 { return &v }

// New returns a report of the current schema for provider with the published reference filled in.
func New(provider string) *Report {
	return &Report{SchemaVersion: SchemaVersion, Provider: provider, Reference: Published()}
}

// Validate checks the enumerated values and that emulated data-plane latency is never labelled as
// ztunnel latency (the local provider has only the emulated data plane; kind and kube only ztunnel).
func (r *Report) Validate() error {
	var errs []error
	if r.SchemaVersion != SchemaVersion {
		errs = append(errs, fmt.Errorf("schemaVersion %d, want %d", r.SchemaVersion, SchemaVersion))
	}
	switch r.Provider {
	case ProviderLocal, ProviderKind, ProviderKube:
	default:
		errs = append(errs, fmt.Errorf("provider %q is not local, kind or kube", r.Provider))
	}
	switch r.DataPlane {
	case "", DataPlaneEmulated, DataPlaneZtunnel:
	default:
		errs = append(errs, fmt.Errorf("dataPlane %q is not emulated or ztunnel", r.DataPlane))
	}
	if r.Latency != nil && r.DataPlane == "" {
		errs = append(errs, errors.New("latency present but dataPlane is not set"))
	}
	if r.Provider == ProviderLocal && r.DataPlane == DataPlaneZtunnel {
		errs = append(errs, errors.New("provider local runs the emulated data plane; dataPlane must be emulated, not ztunnel"))
	}
	if (r.Provider == ProviderKind || r.Provider == ProviderKube) && r.DataPlane == DataPlaneEmulated {
		errs = append(errs, fmt.Errorf("provider %s runs ztunnel; dataPlane must not be emulated", r.Provider))
	}
	if cp := r.ControlPlane; cp != nil {
		if cp.Istiods != IstiodsAll && cp.Istiods != IstiodsObserved {
			errs = append(errs, fmt.Errorf("controlPlane.istiods %q is not all or observed", cp.Istiods))
		}
	}
	if l := r.Latency; l != nil {
		for i, run := range l.Runs {
			if run.Path != PathLocal && run.Path != PathCrossCluster {
				errs = append(errs, fmt.Errorf("latency.runs[%d].path %q is not local or cross-cluster", i, run.Path))
			}
			errs = append(errs, checkConn("latency.runs", i, run))
		}
		for i, run := range l.HarnessFloor {
			if run.Path != PathDirect {
				errs = append(errs, fmt.Errorf("latency.harnessFloor[%d].path %q is not direct", i, run.Path))
			}
			errs = append(errs, checkConn("latency.harnessFloor", i, run))
		}
	}
	errs = append(errs, validateChecks(r.IstiodChecks), validateGates(r.Gates))
	if r.Churn != nil {
		errs = append(errs, validateChurn(r.Churn)...)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid report: %w", err)
	}
	return nil
}

func checkConn(field string, i int, run LatencyRun) error {
	if run.Connections != ConnNew && run.Connections != ConnReused {
		return fmt.Errorf("%s[%d].connections %q is not new or reused", field, i, run.Connections)
	}
	return nil
}

// Read loads a report.json written by JSON (render.Write writes it).
func Read(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%s: schemaVersion %d, this reader knows %d", path, r.SchemaVersion, SchemaVersion)
	}
	return &r, nil
}
