package report

// Latency holds the latency suite's runs.
type Latency struct {
	Runs []LatencyRun `json:"runs,omitempty"`
	// Overhead is cross-cluster (another network) against local, set beside the published
	// figures; SameNetworkOverhead is same-network against local, which they do not cover.
	Overhead            *Overhead `json:"overhead,omitempty"`
	SameNetworkOverhead *Overhead `json:"sameNetworkOverhead,omitempty"`
	// MedianOverhead is Overhead on the runs' medians: what gates judge, since a few requests
	// stalled on a busy host make the average (the published comparison is of averages).
	MedianOverhead *Overhead `json:"medianOverhead,omitempty"`
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
