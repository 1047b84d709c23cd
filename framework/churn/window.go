package churn

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// Spec is one measured churn window: where and how pods change, at what rate, for how long (or
// how many of them, a percent of the first target's pods).
type Spec struct {
	Where, Mode string
	Rate        float64
	Percent     *float64
	Clusters    []string
	Length      time.Duration
}

// Measured is what one window measured: its report row, and what a test judges it by.
type Measured struct {
	Row     report.ChurnRun
	Summary Summary
	Churned Churned
	// Drained says every change showed or was given up on before the drain's limit.
	Drained bool
	// Mismatched are the keys whose state at the watcher differs from the API's at the end, with
	// the API's truth beside them.
	Mismatched, Truth map[string]string
	cost              Cost
	spec              Spec
}

// MeasureWindow changes targets' pods as s says, tracks when each change reaches the watcher w,
// and measures what it cost the istiod sampler reads, until every change showed (at most limit after the window).
// The rate is shared among the targets: the window does the same work however many there are.
func MeasureWindow(ctx context.Context, w *xdswatch.Watcher, sampler *measure.Sampler, limit time.Duration, s Spec, targets []*Pods) (*Measured, error) {
	tr := NewTracker(nil)
	snap, unsubscribe := w.Subscribe(func(u xdswatch.Update) { tr.Observe(u.Name, StateOf(u.Name, u.Address), u.At) })
	defer unsubscribe()
	tr.Seed(States(snap))

	win := Window{Mode: s.Mode, Rate: s.Rate / float64(len(targets)), Duration: s.Length}
	if s.Percent != nil {
		win.Count = int(math.Ceil(*s.Percent / 100 * float64(targets[0].Len())))
	}
	// The cost window runs until every change showed: istiod's debounced pushes for the last
	// changes belong to this window.
	before, err := sampler.Scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping istiod %s: %w", sampler.Name, err)
	}
	cpuBefore, err := sampler.ReadCPU(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading istiod %s CPU: %w", sampler.Name, err)
	}
	churned, err := Run(ctx, tr, win, targets...)
	if err != nil {
		return nil, fmt.Errorf("churn %s: %w", s.Where, err)
	}
	drained := Drain(ctx, tr, limit)
	cpuAfter, err := sampler.ReadCPU(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading istiod %s CPU: %w", sampler.Name, err)
	}
	after, err := sampler.Scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping istiod %s: %w", sampler.Name, err)
	}

	truth, err := truthOf(ctx, targets)
	if err != nil {
		return nil, err
	}
	mismatched := tr.Mismatches(truth)
	sum := Summarize(tr.Results(), limit, len(mismatched))
	cost, err := CostBetween(cpuBefore, cpuAfter, before, after)
	if err != nil {
		return nil, err
	}
	settled, err := sampler.Settled(ctx, 1, time.Second)
	if err != nil {
		return nil, err
	}
	row := report.ChurnRun{
		Where: s.Where, Mode: s.Mode, RatePodsPerSecond: s.Rate, PercentOfPods: s.Percent, Clusters: s.Clusters,
		AchievedPodsPerSecond: churned.AchievedRate(1), DurationSeconds: churned.Elapsed.Seconds(), CostSeconds: cost.Seconds,
		Changes: churned.Changes, Dropped: churned.Dropped, Samples: sum.Samples, Superseded: sum.Superseded, Lost: sum.Lost,
		P50Ms: msp(sum.P50), P90Ms: msp(sum.P90), P99Ms: msp(sum.P99), MaxMs: msp(sum.Max),
		IstiodCPUCores: report.F(cost.CPUCores), IstiodCPUResolutionCores: report.F(cost.ResolutionCores),
		IstiodCPUSource: cost.CPUSource, PushesPerSecond: cost.PushesPerSecond, PushesPerSecondByType: cost.ByType,
		ConnectedXDSClients: cost.ConnectedXDS, CSRs: &cost.CSRs,
		RSSBytes: report.F(settled.RSSBytes), LiveHeapBytes: report.F(settled.LiveHeapBytes),
	}
	return &Measured{Row: row, Summary: sum, Churned: churned, Drained: drained, Mismatched: mismatched, Truth: truth, cost: cost, spec: s}, nil
}

// String sums the window up in one line, for the run's log.
func (m *Measured) String() string {
	s, sum, run, cost := m.spec, m.Summary, m.Row, m.cost
	size := fmt.Sprintf("%s windows", s.Length)
	if s.Percent != nil {
		size = fmt.Sprintf("%g%% of the pods", *s.Percent)
	}
	line := fmt.Sprintf("%s %s %.0f pods/s, %s (achieved %.1f): %d changes, %d samples, lost %d (late %d, unseen %d, wrong final state %d), superseded %d; "+
		"p50 %s p90 %s p99 %s max %s ms; istiod %.4f cores (%s, resolution %.1g), %s pushes/s %v, %s xDS clients, %.0f CSRs (%.0f signed), rss %.0f MB, live heap %.0f MB",
		s.Where, s.Mode, s.Rate, size, run.AchievedPodsPerSecond, run.Changes, sum.Samples, sum.Lost, sum.Late, sum.Unseen, sum.Mismatched, sum.Superseded,
		fmt1(run.P50Ms), fmt1(run.P90Ms), fmt1(run.P99Ms), fmt1(run.MaxMs), cost.CPUCores, cost.CPUSource, cost.ResolutionCores,
		fmt1(cost.PushesPerSecond), roundMap(cost.ByType), fmt1(cost.ConnectedXDS), cost.CSRs.Received, cost.CSRs.Issued, *run.RSSBytes/1e6, *run.LiveHeapBytes/1e6)
	if m.Churned.Late > 0 || m.Churned.Dropped > 0 {
		line += fmt.Sprintf("; %d changes started late and %d due ones dropped at the window's end (every target had a change in flight)", m.Churned.Late, m.Churned.Dropped)
	}
	return line
}

// FirstMismatches lists up to n keys whose watcher state differs from the truth, for failure
// messages.
func (m *Measured) FirstMismatches(n int) []string {
	keys := slices.Sorted(maps.Keys(m.Mismatched))
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%s: watcher %q, API %q", k, m.Mismatched[k], m.Truth[k]))
	}
	return out
}

// truthOf is every target's pods as the API has them, by watcher key.
func truthOf(ctx context.Context, targets []*Pods) (map[string]string, error) {
	truth := map[string]string{}
	for _, p := range targets {
		tt, err := p.Truth(ctx)
		if err != nil {
			return nil, err
		}
		maps.Copy(truth, tt)
	}
	return truth, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msp(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	return report.F(ms(*d))
}

func fmt1(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 1, 64)
}

func roundMap(m map[string]float64) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = strconv.FormatFloat(v, 'f', 1, 64)
	}
	return out
}
