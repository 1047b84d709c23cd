package report

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Churn cases (where the pods changed).
const (
	ChurnLocal     = "local"
	ChurnOneRemote = "one-remote"
	ChurnAllRemote = "all-remote"
)

// ChurnSVG is the chart of propagation latency against churn rate.
const ChurnSVG = "churn.svg"

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
	RSSBytes                 *float64           `json:"rssBytes,omitempty"`
	LiveHeapBytes            *float64           `json:"liveHeapBytes,omitempty"`
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

func markdownChurn(b *bytes.Buffer, c *Churn) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("## Churn\n\n")
	p("Pods changed in a cluster at a rate; propagation latency runs from sending the API write to the arrival, "+
		"in the test process, of the update that reflects it at a ztunnel-like delta workload-xDS client of istiod %s "+
		"(%d such client(s) connected). It includes istiod's push debounce: a push waits for PILOT_DEBOUNCE_AFTER = %s ms "+
		"without events, at most PILOT_DEBOUNCE_MAX = %s ms. Local: the pod's workload appears, disappears or changes health; "+
		"remote: the remote network's split-horizon workload of the service changes its capacity (one change in flight per "+
		"service). A replacement is two samples (old pod deleted, new pod Ready). Because a remote change waits for the previous change "+
		"of its service to show, remote writes pause while istiod debounces: remote churn cannot hold the debounce open as open-loop "+
		"local churn does, so compare the achieved rates, and read remote latencies at high rates as what this closed loop sees. Lost: not reflected within %s ms, or the "+
		"final state differs from the API. Cost (CPU, pushes) covers the churn and the wait until every change showed. CPU comes from the source named in the JSON (istiodCPUSource) over that window; a value below the "+
		"resolution column is below what the source resolves. MB = 10^6 bytes.\n\n",
		cell(c.ObservedIstiod), c.Clients, num(c.Debounce.AfterMs, 0), num(c.Debounce.MaxMs, 0), num(c.LostAfterMs, 0))
	if len(c.Runs) > 0 {
		p("| Where | Mode | Rate pods/s | Achieved pods/s | %% of pods | Changes | Samples | Lost | p50 ms | p90 ms | p99 ms | max ms | istiod CPU cores | CPU resolution cores | Pushes/s | Pushes/s by type | xDS clients | RSS MB | Live heap MB |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range c.Runs {
			p("| %s | %s | %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				cell(r.Where), cell(r.Mode), num(r.RatePodsPerSecond, 1), num(r.AchievedPodsPerSecond, 1), opt(r.PercentOfPods, 1, 0),
				r.Changes, r.Samples, r.Lost, opt(r.P50Ms, 1, 1), opt(r.P90Ms, 1, 1), opt(r.P99Ms, 1, 1), opt(r.MaxMs, 1, 1),
				cpu(r.IstiodCPUCores, r.IstiodCPUResolutionCores, 3), optRes(r.IstiodCPUResolutionCores), opt(r.PushesPerSecond, 1, 1),
				cell(byType(r.PushesPerSecondByType)), opt(r.ConnectedXDSClients, 1, 0), opt(r.RSSBytes, bytesPerMB, 1), opt(r.LiveHeapBytes, bytesPerMB, 1))
		}
		p("\n")
	}
	if len(c.Knee) > 0 {
		p("### Knee\n\nThe lowest rate whose p50 exceeds twice the p50 at the lowest rate.\n\n| Where | Mode | %% of pods | Lowest rate pods/s | Its p50 ms | Knee pods/s |\n|---|---|---|---|---|---|\n")
		for _, k := range c.Knee {
			knee := "none in the sweep"
			if k.RatePodsPerSecond != nil {
				knee = num(*k.RatePodsPerSecond, 1)
			}
			p("| %s | %s | %s | %s | %s | %s |\n", cell(k.Where), cell(k.Mode), opt(k.PercentOfPods, 1, 0), num(k.BaseRate, 1), num(k.BaseP50Ms, 1), knee)
		}
		p("\n")
	}
	if f := c.Finding; f != nil {
		p("### Finding: remote endpoints that turn unready\n\n%s\n\n", strings.ReplaceAll(f.Detail, "\n", " "))
	}
	if hasChurnRuns(c) {
		p("![propagation latency against churn rate](%s)\n\n", ChurnSVG)
	}
}

func byType(m map[string]float64) string {
	keys := sortedKeys(m)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+num(m[k], 1))
	}
	if len(parts) == 0 {
		return missingCellValue
	}
	return strings.Join(parts, ", ")
}

func hasChurnRuns(c *Churn) bool {
	if c == nil {
		return false
	}
	for _, r := range c.Runs {
		if r.P50Ms != nil {
			return true
		}
	}
	return false
}

// churnSVG charts p50 and p99 propagation latency against rate, one series per case and mode (of
// the windows sized by duration), or returns nil when no run has a latency.
func churnSVG(c *Churn) []byte {
	if !hasChurnRuns(c) {
		return nil
	}
	var names []string
	bySeries := map[string]*[2]series{}
	for _, r := range c.Runs {
		if r.P50Ms == nil || r.PercentOfPods != nil {
			continue
		}
		name := r.Where + " " + r.Mode
		s, ok := bySeries[name]
		if !ok {
			s = &[2]series{{name: name}, {name: name}}
			bySeries[name] = s
			names = append(names, name)
		}
		s[0].points = append(s[0].points, point{r.RatePodsPerSecond, *r.P50Ms})
		s[1].points = append(s[1].points, point{r.RatePodsPerSecond, *r.P99Ms})
	}
	slices.Sort(names)
	p50 := panel{title: "propagation latency p50 (" + c.ObservedIstiod + ")", xLabel: "churn rate, pods/s per churned cluster", yLabel: "ms"}
	p99 := panel{title: "propagation latency p99", xLabel: p50.xLabel, yLabel: "ms"}
	for _, n := range names {
		p50.series = append(p50.series, bySeries[n][0])
		p99.series = append(p99.series, bySeries[n][1])
	}
	return linePanels([]panel{p50, p99})
}

// benchChurn writes one line per churn window: BenchmarkChurn/where=.../mode=.../rate=...
func benchChurn(b *bytes.Buffer, clusters int, c *Churn) {
	if c == nil {
		return
	}
	for _, r := range c.Runs {
		name := fmt.Sprintf("BenchmarkChurn/clusters=%d/where=%s/mode=%s/rate=%s", clusters, token(r.Where), token(r.Mode),
			strconv.FormatFloat(r.RatePodsPerSecond, 'f', -1, 64))
		if r.PercentOfPods != nil {
			name += "/percent=" + strconv.FormatFloat(*r.PercentOfPods, 'f', -1, 64)
		}
		ms := optMetrics(optMetric{r.P50Ms, "p50-ms"}, optMetric{r.P90Ms, "p90-ms"}, optMetric{r.P99Ms, "p99-ms"}, optMetric{r.MaxMs, "max-ms"},
			optMetric{r.IstiodCPUCores, "istiod-cpu-cores"}, optMetric{r.PushesPerSecond, "pushes/s"},
			optMetric{r.RSSBytes, "rss-B"}, optMetric{r.LiveHeapBytes, "live-heap-B"})
		ms = append(ms, metric{float64(r.Lost), "lost"}, metric{float64(r.Samples), "samples"}, metric{r.AchievedPodsPerSecond, "achieved-pods/s"})
		for _, t := range sortedKeys(r.PushesPerSecondByType) {
			if v := r.PushesPerSecondByType[t]; !math.IsNaN(v) {
				ms = append(ms, metric{v, token(t) + "-pushes/s"})
			}
		}
		line(b, name, ms...)
	}
}
