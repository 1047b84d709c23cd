package experiment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/latency"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
)

// LatencyRate returns the request rate of the latency runs: -latency.qps when given, else the
// highest rate this host carries (latency.Search).
func (r *Run) LatencyRate(t testing.TB, ctx context.Context, p *Probes, hardest LatencyPath) *report.RateSearch {
	t.Helper()
	if r.Opts.Latency.QPS > 0 {
		return &report.RateSearch{QPS: r.Opts.Latency.QPS, Forced: true}
	}
	rs, err := latency.Search(ctx, r.Experiment(), p, hardest.App, hardest.Name)
	require.NoError(t, err)
	return rs
}

// Fortio drives fortio through the provider's probe client and turns its result into a report row.
func (r *Run) Fortio(t testing.TB, ctx context.Context, p *Probes, rate float64, l probe.Load, path, conns string) report.LatencyRun {
	t.Helper()
	run, err := latency.Run(ctx, r.Experiment(), p, rate, l, path, conns)
	require.NoError(t, err)
	r.Logf("latency: %-13s %-6s %6d requests, %d errors, avg %.3f ms, p50 %.3f, p90 %.3f, p99 %.3f ms, host CPU %.0f%%",
		path, conns, run.Requests, run.Errors, run.AvgMs, run.P50Ms, run.P90Ms, run.P99Ms, 100*run.HostCPUBusy)
	return run
}

// Warmups is the number of extra calls fortio makes: one per connection before the run starts.
func (r *Run) Warmups() int64 { return int64(r.Opts.Latency.Connections) }

// Tunnels is how many client tunnels a run of n requests opens: one per request with new
// connections (plus fortio's warm-up call per connection), one per connection otherwise.
func (r *Run) Tunnels(conns string, n int64) int64 {
	if conns == report.ConnNew {
		return n + r.Warmups()
	}
	return int64(r.Opts.Latency.Connections)
}

// Reached is what the destination's counter must grow by in a run of n requests: every request
// and fortio's warm-up call per connection, or, where the provider counts connections (pc), the
// client's tunnels.
func (r *Run) Reached(pc probe.PathCounters, conns string, n int64) int64 {
	if pc.ServedConnections {
		return r.Tunnels(conns, n)
	}
	return n + r.Warmups()
}

// SumOver adds a per-cluster counter over every cluster.
func SumOver(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// LatencyPath is one path the latency suite measures: the app whose only endpoint is in cluster
// At, as reached from the client.
type LatencyPath struct {
	Name string // report path
	App  string
	At   *cluster.Cluster
}

// LatencyPaths are local, same network (when the topology has a peer) and another network (when it
// has a remote), the last the most demanding.
func (p *Probes) LatencyPaths() []LatencyPath {
	paths := []LatencyPath{{report.PathLocal, probe.EchoLocal, p.Local}}
	if p.Peer != nil {
		paths = append(paths, LatencyPath{report.PathSameNetwork, probe.EchoPeer, p.Peer})
	}
	if p.Remote != nil {
		paths = append(paths, LatencyPath{report.PathCrossCluster, probe.EchoRemote, p.Remote})
	}
	return paths
}

// ConcludeLatency completes the latency section lat of runs at rate: the overheads (cross-cluster,
// same network, by medians), whether the host was saturated (then nothing is set beside the
// published figures), a tail of stalls, the log lines; it asserts an overhead for each path
// measured beside the local one, and puts lat in the report.
func (r *Run) ConcludeLatency(t testing.TB, lat *report.Latency, rate float64) {
	t.Helper()
	lat.Overhead = analysis.ComputeOverhead(lat.Runs)
	lat.SameNetworkOverhead = analysis.ComputeOverheadOf(lat.Runs, report.PathSameNetwork)
	lat.MedianOverhead = analysis.ComputeMedianOverhead(lat.Runs)
	for _, run := range append(append([]report.LatencyRun{}, lat.Runs...), lat.HarnessFloor...) {
		if latency.Starved(run, rate, r.Opts.Latency.Connections) {
			lat.HostCPUSaturated = true
		}
	}
	if lat.HostCPUSaturated {
		r.Report.Warnings = append(r.Report.Warnings, fmt.Sprintf(
			"host CPU was above %.0f%% busy, or a run fell short of %.0f QPS: these latencies measure a saturated %d-core machine, not the mesh, and are not set beside the published figures; lower -latency.qps or leave it unset",
			100*measure.HostSaturated, rate, r.Report.Host.CPUs))
	}
	if w := tailWarning(lat.Runs); w != "" {
		r.Logf("latency: %s", w)
		r.Report.Warnings = append(r.Report.Warnings, w)
	}
	r.Report.Latency = lat
	if o := lat.Overhead; o != nil && !lat.HostCPUSaturated {
		for name, d := range map[string]*report.Delta{"new": o.New, "reused": o.Reused} {
			if d != nil {
				r.Logf("latency: cross-cluster overhead, %s connections, %s data plane: %+.3f ms (%+.0f%%) [published, ztunnel and Envoy: new +2.2 ms (+346%%), reused +0.13 ms (+72%%)]", name, r.Report.DataPlane, d.DeltaMs, d.Percent)
			}
		}
	}
	if o := lat.SameNetworkOverhead; o != nil && o.New != nil && o.Reused != nil {
		r.Logf("latency: same-network overhead: new %+.3f ms (%+.0f%%), reused %+.3f ms (%+.0f%%)", o.New.DeltaMs, o.New.Percent, o.Reused.DeltaMs, o.Reused.Percent)
	}
	measured := func(path string) bool {
		return slices.ContainsFunc(lat.Runs, func(run report.LatencyRun) bool { return run.Path == path })
	}
	if measured(report.PathCrossCluster) {
		require.NotNil(t, lat.Overhead, "overhead computed for both connection modes")
		assert.NotNil(t, lat.Overhead.New)
		assert.NotNil(t, lat.Overhead.Reused)
		require.NotNil(t, lat.MedianOverhead, "median overhead computed for both connection modes")
	}
	if measured(report.PathSameNetwork) {
		require.NotNil(t, lat.SameNetworkOverhead, "same-network overhead computed for both connection modes")
	}
}

// tailWarning names the runs whose averages a tail of stalls dominates, with the overhead their
// medians give; "" when none is. On a 2-core host running ten clusters a few requests of a run can
// wait 20-200 ms, and the published comparison is of averages.
func tailWarning(runs []report.LatencyRun) string {
	tails := analysis.TailDominated(runs)
	if len(tails) == 0 {
		return ""
	}
	var named []string
	for _, r := range tails {
		named = append(named, fmt.Sprintf("%s %s (average %.3f ms, median %.3f, p99 %.1f)", r.Path, r.Connections, r.AvgMs, r.P50Ms, r.P99Ms))
	}
	w := "a tail of slow requests dominates the average of " + strings.Join(named, ", ")
	if o := analysis.ComputeMedianOverhead(runs); o != nil && o.New != nil && o.Reused != nil {
		w += fmt.Sprintf("; the cross-cluster overhead by medians: new %+.3f ms, reused %+.3f ms", o.New.DeltaMs, o.Reused.DeltaMs)
	}
	return w
}
