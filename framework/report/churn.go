package report

import (
	"fmt"
)

// Churn cases (where the pods changed).
const (
	ChurnLocal     = "local"
	ChurnOneRemote = "one-remote"
	ChurnAllRemote = "all-remote"
)

// Churn is the churn suite: how fast endpoint changes reach a ztunnel-like client of the observed
// istiod, and what the churn costs that istiod.
type Churn struct {
	ObservedIstiod string          `json:"observedIstiod"`
	MeasuredIstiod *MeasuredIstiod `json:"measuredIstiod,omitempty"`
	// Clients is how many ztunnel-like xDS clients the run held connected to the observed istiod.
	Clients  int           `json:"clients"`
	Debounce ChurnDebounce `json:"debounce"`
	// LostAfterMs is the limit past which a change counts as lost (PILOT_DEBOUNCE_MAX + 5 s).
	LostAfterMs float64       `json:"lostAfterMs"`
	Runs        []ChurnRun    `json:"runs,omitempty"`
	Knee        []ChurnKnee   `json:"knee,omitempty"`
	Finding     *ChurnFinding `json:"finding,omitempty"`
}

// ChurnDebounce is istiod's push debounce: a push waits for AfterMs of quiet, at most MaxMs.
type ChurnDebounce struct {
	AfterMs float64 `json:"afterMs"`
	MaxMs   float64 `json:"maxMs"`
}

// ChurnRun is one churn window.
type ChurnRun struct {
	Where string `json:"where"` // local, one-remote, all-remote
	Mode  string `json:"mode"`  // replace, ready
	// RatePodsPerSecond is the target rate over all churned clusters together (each gets an even
	// share); AchievedPodsPerSecond what the run reached in total (lower when every target had a
	// change in flight).
	RatePodsPerSecond     float64  `json:"ratePodsPerSecond"`
	AchievedPodsPerSecond float64  `json:"achievedPodsPerSecond"`
	PercentOfPods         *float64 `json:"percentOfPods,omitempty"`
	Clusters              []string `json:"clusters"`
	DurationSeconds       float64  `json:"durationSeconds"`
	// Changes counts pods changed; Samples the tracked API writes (a replacement is two: the old
	// pod deleted, the new one Ready); Superseded those a later write's push reflected. Dropped
	// counts changes a timed window had due but did not start before it ended (every target had
	// a change in flight): the window keeps its length and the achieved rate says the difference.
	Changes    int `json:"changes"`
	Dropped    int `json:"dropped"`
	Samples    int `json:"samples"`
	Superseded int `json:"superseded"`
	Lost       int `json:"lost"`
	// Latency from sending the write to the arrival of the update that reflects it, over the
	// samples reflected in time; absent when none was.
	P50Ms *float64 `json:"p50Ms,omitempty"`
	P90Ms *float64 `json:"p90Ms,omitempty"`
	P99Ms *float64 `json:"p99Ms,omitempty"`
	MaxMs *float64 `json:"maxMs,omitempty"`
	// CostSeconds is the cost window: from just before the first change until every change showed
	// at the watcher (or the lost limit passed).
	CostSeconds float64 `json:"costSeconds"`
	// IstiodCPUCores over the cost window, with the resolution of its counter over the window.
	IstiodCPUCores           *float64           `json:"istiodCPUCores,omitempty"`
	IstiodCPUResolutionCores *float64           `json:"istiodCPUResolutionCores,omitempty"`
	IstiodCPUSource          string             `json:"istiodCPUSource,omitempty"`
	PushesPerSecond          *float64           `json:"pushesPerSecond,omitempty"`
	PushesPerSecondByType    map[string]float64 `json:"pushesPerSecondByType,omitempty"`
	ConnectedXDSClients      *float64           `json:"connectedXDSClients,omitempty"`
	// CSRs is what the measured istiod counted over the cost window: CSRs received and
	// certificates signed for the pods the churn brought to nodes whose ztunnel held no
	// certificate of their identity.
	CSRs          *IstiodCSRs `json:"csrs,omitempty"`
	RSSBytes      *float64    `json:"rssBytes,omitempty"`
	LiveHeapBytes *float64    `json:"liveHeapBytes,omitempty"`
}

// ChurnKnee is, for one case and mode, the lowest rate whose p50 exceeds twice the p50 at the
// lowest rate; RatePodsPerSecond is absent when no rate of the sweep did.
type ChurnKnee struct {
	Where             string   `json:"where"`
	Mode              string   `json:"mode"`
	PercentOfPods     *float64 `json:"percentOfPods,omitempty"`
	BaseRate          float64  `json:"baseRatePodsPerSecond"`
	BaseP50Ms         float64  `json:"baseP50Ms"`
	RatePodsPerSecond *float64 `json:"ratePodsPerSecond,omitempty"`
}

// ChurnFinding is what a ztunnel in the observed cluster sees when a remote endpoint turns
// unready: whether the split-horizon capacity still counts it.
type ChurnFinding struct {
	Cluster                  string `json:"cluster"`
	Service                  string `json:"service"`
	Endpoints                int    `json:"endpoints"`
	CapacityBefore           int    `json:"capacityBefore"`
	CapacityWithOneUnready   int    `json:"capacityWithOneUnready"`
	CapacityWithAllUnready   int    `json:"capacityWithAllUnready"`
	UnreadyCountedInCapacity bool   `json:"unreadyCountedInCapacity"`
	Detail                   string `json:"detail"`
}

func validateChurn(c *Churn) []error {
	var errs []error
	for i, r := range c.Runs {
		switch r.Where {
		case ChurnLocal, ChurnOneRemote, ChurnAllRemote:
		default:
			errs = append(errs, fmt.Errorf("churn.runs[%d].where %q is not local, one-remote or all-remote", i, r.Where))
		}
	}
	return errs
}
