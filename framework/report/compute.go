package report

import (
	"errors"
	"math"
	"slices"

	"github.com/ambientmc/ambientmc/framework/stats"
)

// ComputeOverhead compares cross-cluster (another network) with local runs on average latency,
// per connection mode: the overhead set beside the published figures.
func ComputeOverhead(runs []LatencyRun) *Overhead { return ComputeOverheadOf(runs, PathCrossCluster) }

// ComputeOverheadOf compares path's runs with local runs on average latency, per connection
// mode. Several runs of one path and mode are averaged. A mode lacking either path (or with a
// local average of 0, which has no percentage) is nil; the result is nil when both modes are.
func ComputeOverheadOf(runs []LatencyRun, path string) *Overhead {
	o := &Overhead{New: overhead(runs, path, ConnNew), Reused: overhead(runs, path, ConnReused)}
	if o.New == nil && o.Reused == nil {
		return nil
	}
	return o
}

func overhead(runs []LatencyRun, path, conn string) *Delta {
	var local, cross []float64
	for _, r := range runs {
		if r.Connections != conn {
			continue
		}
		switch r.Path {
		case PathLocal:
			local = append(local, r.AvgMs)
		case path:
			cross = append(cross, r.AvgMs)
		}
	}
	if len(local) == 0 || len(cross) == 0 {
		return nil
	}
	l, c := stats.Mean(local), stats.Mean(cross)
	if l == 0 {
		return nil
	}
	return &Delta{DeltaMs: c - l, Percent: (c - l) / l * 100}
}

// FillDeltas sets each join's deltas against the step before it (the first join against the
// baseline), in the order the joins happened. A delta is nil when either side was not measured.
func (cp *ControlPlane) FillDeltas() {
	prev := cp.Baseline
	for i := range cp.Joins {
		j := &cp.Joins[i]
		j.DeltaCPUCores = sub(j.CPUCores, prev.CPUCores)
		j.DeltaRSSBytes = sub(j.RSSBytes, prev.RSSBytes)
		j.DeltaHeapInuseBytes = sub(j.HeapInuseBytes, prev.HeapInuseBytes)
		j.DeltaLiveHeapBytes = sub(j.LiveHeapBytes, prev.LiveHeapBytes)
		prev = j.Sample
	}
}

func sub(a, b *float64) *float64 {
	if a == nil || b == nil {
		return nil
	}
	return F(*a - *b)
}

// FitPerRemote sets PerRemoteCluster to least-squares slopes over (remoteClusters, value),
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
func (cp *ControlPlane) FitPerRemote() error {
	joins := slices.Clone(cp.Joins)
	slices.SortStableFunc(joins, func(a, b Join) int { return a.RemoteClusters - b.RemoteClusters })

	// level collects (x, value) where value is measured, and the coarsest resolution among them.
	level := func(get func(Sample) (v, res *float64)) (xs, ys []float64, res *float64) {
		add := func(x float64, s Sample) {
			v, r := get(s)
			if v == nil {
				return
			}
			xs, ys = append(xs, x), append(ys, *v)
			if r != nil && (res == nil || *r > *res) {
				res = F(*r)
			}
		}
		add(0, cp.Baseline)
		for _, j := range joins {
			add(float64(j.RemoteClusters), j.Sample)
		}
		return xs, ys, res
	}
	var pr PerRemote
	fitted := false
	fit := func(xs, ys []float64, pointRes *float64, slope, stderr, res **float64) {
		f, err := stats.LinearFit(xs, ys)
		if err != nil {
			return
		}
		*slope = F(f.Slope)
		if f.N >= 3 && finite(f.SlopeStdErr) {
			*stderr = F(f.SlopeStdErr)
		}
		if res != nil && pointRes != nil {
			*res = F(*pointRes / (slices.Max(xs) - slices.Min(xs)))
		}
		fitted = true
	}
	fitLevel := func(get func(Sample) (v, res *float64), slope, stderr, res **float64) {
		xs, ys, r := level(get)
		fit(xs, ys, r, slope, stderr, res)
	}
	noRes := func(v func(Sample) *float64) func(Sample) (*float64, *float64) {
		return func(s Sample) (*float64, *float64) { return v(s), nil }
	}
	fitLevel(func(s Sample) (*float64, *float64) { return s.CPUCores, s.CPUCoresResolution },
		&pr.CPUCores, &pr.CPUCoresStdErr, &pr.CPUCoresResolution)
	fitLevel(func(s Sample) (*float64, *float64) { return s.SteadyCPUCores, s.SteadyCPUCoresResolution },
		&pr.SteadyCPUCores, &pr.SteadyCPUCoresStdErr, &pr.SteadyCPUCoresResolution)
	fitLevel(noRes(func(s Sample) *float64 { return s.RSSBytes }), &pr.RSSBytes, &pr.RSSBytesStdErr, nil)
	fitLevel(noRes(func(s Sample) *float64 { return s.HeapInuseBytes }), &pr.HeapInuseBytes, &pr.HeapInuseBytesStdErr, nil)
	fitLevel(noRes(func(s Sample) *float64 { return s.LiveHeapBytes }), &pr.LiveHeapBytes, &pr.LiveHeapBytesStdErr, nil)

	xs, ys := []float64{0}, []float64{0}
	var total float64
	var joinRes *float64
	for _, j := range joins {
		if j.JoinCPUSeconds == nil {
			break
		}
		total += *j.JoinCPUSeconds
		xs, ys = append(xs, float64(j.RemoteClusters)), append(ys, total)
		if r := j.JoinCPUSecondsResolution; r != nil && (joinRes == nil || *r > *joinRes) {
			joinRes = F(*r)
		}
	}
	fit(xs, ys, joinRes, &pr.JoinCPUSeconds, &pr.JoinCPUSecondsStdErr, &pr.JoinCPUSecondsResolution)

	if !fitted {
		return errors.New("report: no control-plane metric has two measured points to fit")
	}
	cp.PerRemoteCluster = &pr
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// FitJoinGrowth fits each join's own cost (join CPU-seconds, convergence, sync) against the number
// of remote clusters already joined when it started (0 for the first join). The cumulative
// per-remote slope of FitPerRemote is the average join's cost; this says whether the k-th join
// costs more than the first.
func (cp *ControlPlane) FitJoinGrowth() {
	line := func(get func(Join) *float64) *Line {
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
		l := &Line{Intercept: f.Intercept, Slope: f.Slope, N: f.N}
		if f.N >= 3 && finite(f.SlopeStdErr) {
			l.SlopeStdErr = F(f.SlopeStdErr)
		}
		return l
	}
	g := &JoinGrowth{
		JoinCPUSeconds:     line(func(j Join) *float64 { return j.JoinCPUSeconds }),
		ConvergenceSeconds: line(func(j Join) *float64 { return j.ConvergenceSeconds }),
		SyncSeconds:        line(func(j Join) *float64 { return j.SyncSeconds }),
	}
	if g.JoinCPUSeconds == nil && g.ConvergenceSeconds == nil && g.SyncSeconds == nil {
		g = nil
	}
	cp.JoinGrowth = g
}
