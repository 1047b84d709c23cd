package analysis

import (
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/stats"
)

// ComputeOverhead compares cross-cluster (another network) with local runs on average latency,
// per connection mode: the overhead set beside the published figures.
func ComputeOverhead(runs []report.LatencyRun) *report.Overhead {
	return ComputeOverheadOf(runs, report.PathCrossCluster)
}

// ComputeOverheadOf compares path's runs with local runs on average latency, per connection
// mode. Several runs of one path and mode are averaged. A mode lacking either path (or with a
// local average of 0, which has no percentage) is nil; the result is nil when both modes are.
func ComputeOverheadOf(runs []report.LatencyRun, path string) *report.Overhead {
	return overheadBy(runs, path, func(r report.LatencyRun) float64 { return r.AvgMs })
}

// ComputeMedianOverhead is ComputeOverhead on the runs' medians (p50), which a tail of a few
// stalled requests leaves alone.
func ComputeMedianOverhead(runs []report.LatencyRun) *report.Overhead {
	return overheadBy(runs, report.PathCrossCluster, func(r report.LatencyRun) float64 { return r.P50Ms })
}

// TailDominated returns the runs whose average is above twice their median: a few slow requests
// make their average, so an overhead of averages says more about the host than the path.
func TailDominated(runs []report.LatencyRun) []report.LatencyRun {
	var out []report.LatencyRun
	for _, r := range runs {
		if r.P50Ms > 0 && r.AvgMs > 2*r.P50Ms {
			out = append(out, r)
		}
	}
	return out
}

func overheadBy(runs []report.LatencyRun, path string, value func(report.LatencyRun) float64) *report.Overhead {
	o := &report.Overhead{New: overhead(runs, path, report.ConnNew, value), Reused: overhead(runs, path, report.ConnReused, value)}
	if o.New == nil && o.Reused == nil {
		return nil
	}
	return o
}

func overhead(runs []report.LatencyRun, path, conn string, value func(report.LatencyRun) float64) *report.Delta {
	var local, cross []float64
	for _, r := range runs {
		if r.Connections != conn {
			continue
		}
		switch r.Path {
		case report.PathLocal:
			local = append(local, value(r))
		case path:
			cross = append(cross, value(r))
		}
	}
	if len(local) == 0 || len(cross) == 0 {
		return nil
	}
	l, c := stats.Mean(local), stats.Mean(cross)
	if l == 0 {
		return nil
	}
	return &report.Delta{DeltaMs: c - l, Percent: (c - l) / l * 100}
}
