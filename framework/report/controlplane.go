package report

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
	Leaves     []Leave     `json:"leaves,omitempty"` // not in the base schema; extra

	// Sequences, with -join.repeats of 2 or more, are every join sequence the suite measured,
	// each on an istiod started fresh for it. Baseline, Joins and JoinGrowth are then the first
	// sequence's; PerRemoteCluster is the mean of the sequences' fits with that mean's standard
	// error (PerRemote.StdErrOf), and BaselineMean and BaselineStdErr are the same for the
	// baseline. Absent with one sequence.
	Sequences      []JoinSequence `json:"sequences,omitempty"`
	BaselineMean   *Sample        `json:"baselineMean,omitempty"`
	BaselineStdErr *Sample        `json:"baselineStdErr,omitempty"`

	// Clients are, for every istiod of the run, the xDS clients it served once every cluster had
	// joined, by kind, as istiod's /debug/adsz listed them (its own count, so Istio's own proxies
	// and the data plane's clients are in it too).
	Clients []IstiodClients `json:"clients,omitempty"`
}

// Kinds of xDS client of istiod (IstiodClients, Join.XDS).
const (
	// ClientZtunnel: a ztunnel, or a ztunnel-like client (workload xDS).
	ClientZtunnel = "ztunnel"
	// ClientEastWest: an east-west gateway's Envoy (class istio-east-west: a waypoint-type proxy).
	ClientEastWest = "eastwest"
	// ClientWaypoint: a waypoint's Envoy (class istio-waypoint).
	ClientWaypoint = "waypoint"
)

// IstiodClients are the xDS clients one istiod served, by kind; Other counts the rest (routers,
// sidecars).
type IstiodClients struct {
	Istiod   string `json:"istiod"`
	Ztunnel  int    `json:"ztunnel"`
	EastWest int    `json:"eastwest"`
	Waypoint int    `json:"waypoint"`
	Other    int    `json:"other,omitempty"`
}

// XDSReceived is what istiod pushed the framework's clients of one kind over a window: every
// response each acknowledged, its resources, and its bytes (the message, without gRPC framing).
type XDSReceived struct {
	// Clients is how many of the framework's clients of the kind were counted.
	Clients   int   `json:"clients"`
	Pushes    int64 `json:"pushes"`
	Resources int64 `json:"resources"`
	Bytes     int64 `json:"bytes"`
	// ByType splits them by xDS type, as istiod's metrics name them (cds, lds, eds, rds, sds,
	// wds, wads).
	ByType map[string]XDSCount `json:"byType,omitempty"`
}

// XDSCount is one xDS type's share of an XDSReceived.
type XDSCount struct {
	Pushes    int64 `json:"pushes"`
	Resources int64 `json:"resources"`
	Bytes     int64 `json:"bytes"`
}

// JoinSequence is one measured sequence: a fresh istiod's baseline, then every remote cluster
// joining one at a time, and the per-remote fit over those points.
type JoinSequence struct {
	MeasuredIstiod   *MeasuredIstiod `json:"measuredIstiod,omitempty"`
	Baseline         Sample          `json:"baseline"`
	Joins            []Join          `json:"joins"`
	PerRemoteCluster *PerRemote      `json:"perRemoteCluster,omitempty"`
}

// What a per-remote standard error is of (PerRemote.StdErrOf).
const (
	// StdErrOfFit: the least-squares fit's own, from its residuals. It says how well a line fits
	// one sequence's points, not how far the slope moves from one istiod to the next.
	StdErrOfFit = "fit"
	// StdErrOfSequences: the standard error of the mean over the sequences, each on a fresh
	// istiod, so it includes that istiod-to-istiod spread.
	StdErrOfSequences = "sequences"
)

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
	// WorkingSetBytes is istiod's memory cgroup's usage minus its inactive file pages, as kubelet
	// reads a container's (absent where istiod runs in no cgroup of its own).
	WorkingSetBytes *float64 `json:"workingSetBytes,omitempty"`
}

// MeasuredIstiod says which istiod a section measured and what it had held before: a figure
// "from nothing" needs one that held no remote cluster (istiod keeps part of a cluster's memory
// after it leaves), so a suite restarts it fresh when it had held a cluster the section does not
// want, or let one go or rebuilt it since (a leave, a rotated secret).
type MeasuredIstiod struct {
	Cluster string `json:"cluster"`
	// HeldBefore is how many remote clusters it had held since its start when the section began.
	HeldBefore int `json:"heldBefore"`
	// Restarted says it was restarted for the section, so it held nothing when measured.
	Restarted bool `json:"restarted,omitempty"`
	// Kept says it was measured without a restart: every cluster it had held was still a member
	// the section wanted (none had left or been rebuilt), the state a fresh istiod joined to them
	// would be in.
	Kept bool   `json:"kept,omitempty"`
	Note string `json:"note,omitempty"`
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
	SettleSeconds *float64 `json:"settleSeconds,omitempty"`
	SettleCapped  bool     `json:"settleCapped,omitempty"`
	// QuietLimitCores is the rate istiod's CPU had to stay under for the adaptive settle: the idle
	// band's limit, raised when the band was read again after a capped settle.
	QuietLimitCores    *float64 `json:"quietLimitCores,omitempty"`
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
	// XDS is what the observed istiod pushed the framework's own clients of it, by kind
	// (ClientZtunnel, ClientEastWest, ClientWaypoint), from just before the remote secret to the
	// settle point (the join CPU's window). A kind the framework runs no client of (Istio's own
	// proxies run the gateways) is absent.
	XDS map[string]XDSReceived `json:"xds,omitempty"`
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

// PerRemote holds least-squares slopes per remote cluster over baseline + joins. A nil slope could
// not be fitted (fewer than two measured points).
type PerRemote struct {
	// StdErrOf says what each Estimate's StdErr is: StdErrOfFit or StdErrOfSequences.
	StdErrOf string `json:"stdErrOf,omitempty"`

	CPUCores       *Estimate `json:"cpuCores,omitempty"`
	SteadyCPUCores *Estimate `json:"steadyCPUCores,omitempty"`
	JoinCPUSeconds *Estimate `json:"joinCPUSeconds,omitempty"`
	RSSBytes       *Estimate `json:"rssBytes,omitempty"`
	HeapInuseBytes *Estimate `json:"heapInuseBytes,omitempty"`
	LiveHeapBytes  *Estimate `json:"liveHeapBytes,omitempty"`
	// WorkingSetBytes is the slope of istiod's working set as kubelet reads a container's
	// (Sample.WorkingSetBytes).
	WorkingSetBytes *Estimate `json:"workingSetBytes,omitempty"`
}

// PerRemoteMetric is one of PerRemote's estimates.
type PerRemoteMetric struct {
	// Of is where the estimate is in a PerRemote.
	Of func(*PerRemote) **Estimate
	// Sample reads the metric and its resolution (nil where its source has no steps) from one
	// sample; nil for JoinCPUSeconds, which is fitted from the joins' own costs.
	Sample func(Sample) (v, resolution *float64)
}

// PerRemoteMetrics are PerRemote's estimates, in its field order.
var PerRemoteMetrics = []PerRemoteMetric{
	{func(p *PerRemote) **Estimate { return &p.CPUCores }, func(s Sample) (*float64, *float64) { return s.CPUCores, s.CPUCoresResolution }},
	{func(p *PerRemote) **Estimate { return &p.SteadyCPUCores }, func(s Sample) (*float64, *float64) { return s.SteadyCPUCores, s.SteadyCPUCoresResolution }},
	{func(p *PerRemote) **Estimate { return &p.JoinCPUSeconds }, nil},
	{func(p *PerRemote) **Estimate { return &p.RSSBytes }, func(s Sample) (*float64, *float64) { return s.RSSBytes, nil }},
	{func(p *PerRemote) **Estimate { return &p.HeapInuseBytes }, func(s Sample) (*float64, *float64) { return s.HeapInuseBytes, nil }},
	{func(p *PerRemote) **Estimate { return &p.LiveHeapBytes }, func(s Sample) (*float64, *float64) { return s.LiveHeapBytes, nil }},
	{func(p *PerRemote) **Estimate { return &p.WorkingSetBytes }, func(s Sample) (*float64, *float64) { return s.WorkingSetBytes, nil }},
}

// Estimate is one figure with what is known of its error.
type Estimate struct {
	Value float64 `json:"value"`
	// StdErr is the value's standard error (PerRemote.StdErrOf says of what); absent where it
	// could not be estimated (a fit of two points leaves no residual).
	StdErr *float64 `json:"stdErr,omitempty"`
	// Resolution is the slope that one step of the source's resolution across the fitted range
	// would make: a Value below it is not resolved. Absent where the source has no steps.
	Resolution *float64 `json:"resolution,omitempty"`
}

// ValueOf is e's value, nil for no estimate.
func (e *Estimate) ValueOf() *float64 {
	if e == nil {
		return nil
	}
	return &e.Value
}

// StdErrOf is e's standard error, nil for no estimate or none estimated.
func (e *Estimate) StdErrOf() *float64 {
	if e == nil {
		return nil
	}
	return e.StdErr
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
