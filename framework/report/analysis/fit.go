// Package analysis derives figures from a report's measurements: per-remote-cluster slopes and
// join growth (least-squares fits through package stats), each join's deltas, the latency
// overheads, the memory the leaves gave back and the time the profiles cost. The schema it fills
// is package report; it writes nothing itself.
package analysis

import (
	"errors"
	"slices"

	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/stats"
)

// FitPerRemote sets cp.PerRemoteCluster to least-squares slopes over (remoteClusters, value),
// the baseline counting as 0 remote clusters. Each metric uses the points where it was measured;
// one with fewer than two points stays nil, and a standard error needs three (with two the line
// fits exactly and the error is unknown, so it stays nil rather than 0).
//
// joinCPUSeconds is a one-off cost per join, not a level, so it is fitted cumulatively: the point
// for k remote clusters is the CPU-seconds of all joins up to k (0 at the baseline), and the slope is
// the CPU-seconds each added cluster costs. The sum stops at the first join whose cost is unmeasured.
//
// A CPU slope's resolution is the coarsest resolution among its points over the fitted range of
// remote clusters: the slope that one unresolved step across the whole range would make.
// It returns an error, leaving PerRemoteCluster unchanged, when no metric could be fitted.
func FitPerRemote(cp *report.ControlPlane) error {
	joins := slices.Clone(cp.Joins)
	slices.SortStableFunc(joins, func(a, b report.Join) int { return a.RemoteClusters - b.RemoteClusters })

	var pr report.PerRemote
	fitted := false
	fit := func(xs, ys []float64, pointRes *float64) *report.Estimate {
		f, err := stats.LinearFit(xs, ys)
		if err != nil {
			return nil
		}
		fitted = true
		e := &report.Estimate{Value: f.Slope}
		if se, ok := f.KnownSlopeStdErr(); ok {
			e.StdErr = report.F(se)
		}
		if pointRes != nil {
			e.Resolution = report.F(stats.SlopeResolution(*pointRes, xs))
		}
		return e
	}
	// level fits a metric at the samples where it was measured, with the coarsest resolution among them.
	level := func(get func(report.Sample) (v, res *float64)) *report.Estimate {
		var xs, ys []float64
		var coarsest *float64
		add := func(x float64, s report.Sample) {
			v, r := get(s)
			if v == nil {
				return
			}
			xs, ys = append(xs, x), append(ys, *v)
			if r != nil && (coarsest == nil || *r > *coarsest) {
				coarsest = report.F(*r)
			}
		}
		add(0, cp.Baseline)
		for _, j := range joins {
			add(float64(j.RemoteClusters), j.Sample)
		}
		return fit(xs, ys, coarsest)
	}
	for _, m := range report.PerRemoteMetrics {
		if m.Sample != nil {
			*m.Of(&pr) = level(m.Sample)
		}
	}

	xs, costs := []float64{0}, []float64{0}
	var joinRes *float64
	for _, j := range joins {
		if j.JoinCPUSeconds == nil {
			break
		}
		xs, costs = append(xs, float64(j.RemoteClusters)), append(costs, *j.JoinCPUSeconds)
		if r := j.JoinCPUSecondsResolution; r != nil && (joinRes == nil || *r > *joinRes) {
			joinRes = report.F(*r)
		}
	}
	pr.JoinCPUSeconds = fit(xs, stats.Cumulative(costs), joinRes)

	if !fitted {
		return errors.New("report: no control-plane metric has two measured points to fit")
	}
	pr.StdErrOf = report.StdErrOfFit
	cp.PerRemoteCluster = &pr
	return nil
}

// FitJoinGrowth sets cp.JoinGrowth: each join's own cost (join CPU-seconds, convergence, sync)
// fitted against the number of remote clusters already joined when it started (0 for the first
// join). The cumulative per-remote slope of FitPerRemote is the average join's cost; this says
// whether the k-th join costs more than the first. It is nil when no cost has two joins to fit.
func FitJoinGrowth(cp *report.ControlPlane) {
	line := func(get func(report.Join) *float64) *report.Line {
		var xs, ys []float64
		for _, j := range cp.Joins {
			if v := get(j); v != nil {
				xs, ys = append(xs, float64(j.RemoteClusters-1)), append(ys, *v)
			}
		}
		f, err := stats.LinearFit(xs, ys)
		if err != nil {
			return nil
		}
		l := &report.Line{Intercept: f.Intercept, Slope: f.Slope, N: f.N}
		if se, ok := f.KnownSlopeStdErr(); ok {
			l.SlopeStdErr = report.F(se)
		}
		return l
	}
	g := &report.JoinGrowth{
		JoinCPUSeconds:     line(func(j report.Join) *float64 { return j.JoinCPUSeconds }),
		ConvergenceSeconds: line(func(j report.Join) *float64 { return j.ConvergenceSeconds }),
		SyncSeconds:        line(func(j report.Join) *float64 { return j.SyncSeconds }),
	}
	if g.JoinCPUSeconds == nil && g.ConvergenceSeconds == nil && g.SyncSeconds == nil {
		g = nil
	}
	cp.JoinGrowth = g
}
