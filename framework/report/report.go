// Package report is the report.json schema (docs/report.md#the-json-schema): a run's results as types, their JSON
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
const SchemaVersion = 2

// Providers, data planes and other enumerated values of the schema.
const (
	ProviderLocal = "local"
	ProviderKind  = "kind"
	ProviderKube  = "kube"

	DataPlaneEmulated = "emulated"
	DataPlaneZtunnel  = "ztunnel"
	// DataPlaneNone: the clusters run no data plane (the Istio images built here hold no
	// ztunnel or gateway); the data-plane suites skip.
	DataPlaneNone = "none"

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
	// DataPlane is what the provider declares carries traffic: DataPlaneEmulated, DataPlaneZtunnel
	// or DataPlaneNone.
	DataPlane    string        `json:"dataPlane,omitempty"`
	Istio        string        `json:"istio,omitempty"`
	Istiod       *IstiodBuild  `json:"istiod,omitempty"`
	Kubernetes   string        `json:"kubernetes,omitempty"`
	Host         Host          `json:"host"`
	Topology     Topology      `json:"topology"`
	Scale        *Scale        `json:"scale,omitempty"`
	ControlPlane *ControlPlane `json:"controlPlane,omitempty"`
	Latency      *Latency      `json:"latency,omitempty"`
	IstiodChecks []IstiodCheck `json:"istiodChecks,omitempty"`
	Churn        *Churn        `json:"churn,omitempty"` // churn.go
	Reference    Reference     `json:"reference"`

	// Not in the base schema; extra keys a reader may ignore.
	Warnings []string `json:"warnings,omitempty"`
	// IstiodCheckControls are the checks run with a fault injected or kept away, to show each can
	// fail and pass (checks.go).
	IstiodCheckControls []IstiodCheckControl `json:"istiodCheckControls,omitempty"`
	Plan                *Plan                `json:"plan,omitempty"`
	Setup               *Setup               `json:"setup,omitempty"`
	Failover            *Failover            `json:"failover,omitempty"`

	// NodeImage is the kind node image, where the kind provider ran.
	NodeImage string `json:"nodeImage,omitempty"`
	// IstioImages are the images the Istio components ran, with the digests the nodes resolved
	// (kind, kube).
	IstioImages []IstioImage `json:"istioImages,omitempty"`

	// CI verdicts and artifacts (framework/ci): the -gates bounds as judged, the istiod profiles kept,
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

// IstiodBuild says which pilot-discovery ran: built from an istio.io/istio module version (-istiod.version
// or the pinned default) or given as a binary (-istiod.binary).
type IstiodBuild struct {
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

// Reference holds the published figures a run is compared with.
type Reference struct {
	PerRemoteClusterCPUCores    float64 `json:"perRemoteClusterCPUCores"`
	PerRemoteClusterMemoryBytes float64 `json:"perRemoteClusterMemoryBytes"`
	NewConnOverheadMs           float64 `json:"newConnOverheadMs"`
	NewConnOverheadPercent      float64 `json:"newConnOverheadPercent"`
	ReusedConnOverheadMs        float64 `json:"reusedConnOverheadMs"`
	ReusedConnOverheadPercent   float64 `json:"reusedConnOverheadPercent"`
	// Scale is the per-cluster scale the published figures were measured at (not in the base schema).
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

// Validate checks the enumerated values. The provider is any registered name; the data plane is
// the one it declares (emulated or ztunnel), so emulated latency is never labelled as ztunnel's.
func (r *Report) Validate() error {
	var errs []error
	if r.SchemaVersion != SchemaVersion {
		errs = append(errs, fmt.Errorf("schemaVersion %d, want %d", r.SchemaVersion, SchemaVersion))
	}
	if r.Provider == "" {
		errs = append(errs, errors.New("provider is empty: set the -provider value the run used"))
	}
	switch r.DataPlane {
	case "", DataPlaneEmulated, DataPlaneZtunnel, DataPlaneNone:
	default:
		errs = append(errs, fmt.Errorf("dataPlane %q is not emulated, ztunnel or none", r.DataPlane))
	}
	if r.Latency != nil && r.DataPlane == "" {
		errs = append(errs, errors.New("latency present but dataPlane is not set"))
	}
	if cp := r.ControlPlane; cp != nil {
		if cp.Istiods != IstiodsAll && cp.Istiods != IstiodsObserved {
			errs = append(errs, fmt.Errorf("controlPlane.istiods %q is not all or observed", cp.Istiods))
		}
	}
	if l := r.Latency; l != nil {
		for i, run := range l.Runs {
			if run.Path != PathLocal && run.Path != PathSameNetwork && run.Path != PathCrossCluster {
				errs = append(errs, fmt.Errorf("latency.runs[%d].path %q is not local, same-network or cross-cluster", i, run.Path))
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
	errs = append(errs, validateChecks(r.IstiodChecks), validateControls(r.IstiodCheckControls), validateGates(r.Gates))
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
	r, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Decode is Read on report.json's content.
func Decode(b []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("schemaVersion %d, this reader knows %d", r.SchemaVersion, SchemaVersion)
	}
	return &r, nil
}
