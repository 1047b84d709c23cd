package report

import (
	"errors"
	"slices"

	"github.com/ambientmc/ambientmc/framework/stats"
)

// ComputeOverhead compares cross-cluster with local runs on average latency, per connection mode.
// Several runs of one path and mode are averaged. A mode lacking either path (or with a local
// average of 0, which has no percentage) is nil; the result is nil when both modes are.
func ComputeOverhead(runs []LatencyRun) *Overhead {
	o := &Overhead{New: overhead(runs, ConnNew), Reused: overhead(runs, ConnReused)}
	if o.New == nil && o.Reused == nil {
		return nil
	}
	return o
}

func overhead(runs []LatencyRun, conn string) *Delta {
	var local, cross []float64
	for _, r := range runs {
		if r.Connections != conn {
			continue
		}
		switch r.Path {
		case PathLocal:
			local = append(local, r.AvgMs)
		case PathCrossCluster:
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
// one with fewer than two points stays nil. With exactly two points the stderr is 0 (see stats.Fit).
//
// joinCPUSeconds is a one-off cost per join, not a level, so it is fitted cumulatively: the point
// for k remote clusters is the CPU-seconds of all joins up to k (0 at the baseline), and the slope is
// the CPU-seconds each added cluster costs. The sum stops at the first join whose cost is unmeasured.
// It returns an error, leaving PerRemoteCluster unchanged, when no metric could be fitted.
func (cp *ControlPlane) FitPerRemote() error {
	joins := slices.Clone(cp.Joins)
	slices.SortStableFunc(joins, func(a, b Join) int { return a.RemoteClusters - b.RemoteClusters })

	level := func(get func(Sample) *float64) (xs, ys []float64) {
		if v := get(cp.Baseline); v != nil {
			xs, ys = append(xs, 0), append(ys, *v)
		}
		for _, j := range joins {
			if v := get(j.Sample); v != nil {
				xs, ys = append(xs, float64(j.RemoteClusters)), append(ys, *v)
			}
		}
		return xs, ys
	}
	var pr PerRemote
	fitted := false
	fit := func(xs, ys []float64, slope, stderr **float64) {
		f, err := stats.LinearFit(xs, ys)
		if err != nil {
			return
		}
		*slope, *stderr = F(f.Slope), F(f.SlopeStdErr)
		fitted = true
	}
	fit2 := func(get func(Sample) *float64, slope, stderr **float64) {
		xs, ys := level(get)
		fit(xs, ys, slope, stderr)
	}
	fit2(func(s Sample) *float64 { return s.CPUCores }, &pr.CPUCores, &pr.CPUCoresStdErr)
	fit2(func(s Sample) *float64 { return s.SteadyCPUCores }, &pr.SteadyCPUCores, &pr.SteadyCPUCoresStdErr)
	fit2(func(s Sample) *float64 { return s.RSSBytes }, &pr.RSSBytes, &pr.RSSBytesStdErr)
	fit2(func(s Sample) *float64 { return s.HeapInuseBytes }, &pr.HeapInuseBytes, &pr.HeapInuseBytesStdErr)
	fit2(func(s Sample) *float64 { return s.LiveHeapBytes }, &pr.LiveHeapBytes, &pr.LiveHeapBytesStdErr)

	xs, ys := []float64{0}, []float64{0}
	var total float64
	for _, j := range joins {
		if j.JoinCPUSeconds == nil {
			break
		}
		total += *j.JoinCPUSeconds
		xs, ys = append(xs, float64(j.RemoteClusters)), append(ys, total)
	}
	fit(xs, ys, &pr.JoinCPUSeconds, &pr.JoinCPUSecondsStdErr)

	if !fitted {
		return errors.New("report: no control-plane metric has two measured points to fit")
	}
	cp.PerRemoteCluster = &pr
	return nil
}
