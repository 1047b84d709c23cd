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
	o := &report.Overhead{New: overhead(runs, path, report.ConnNew), Reused: overhead(runs, path, report.ConnReused)}
	if o.New == nil && o.Reused == nil {
		return nil
	}
	return o
}

func overhead(runs []report.LatencyRun, path, conn string) *report.Delta {
	var local, cross []float64
	for _, r := range runs {
		if r.Connections != conn {
			continue
		}
		switch r.Path {
		case report.PathLocal:
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
	return &report.Delta{DeltaMs: c - l, Percent: (c - l) / l * 100}
}
