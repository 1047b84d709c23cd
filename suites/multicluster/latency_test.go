package multicluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/latency"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/report/analysis"
	"github.com/ambientmc/ambientmc/suites/multicluster/options"
)

// latencyOptions are the latency flags as framework/latency reads them.
func latencyOptions() latency.Options {
	l := mc.opts.Latency
	return latency.Options{Duration: l.Duration, FloorDuration: l.FloorDuration, Connections: l.Connections, Payload: l.Payload}
}

// latencyQPS returns the request rate of the latency runs: -latency.qps when given, else the
// highest rate this host carries (latency.Search).
func latencyQPS(t *testing.T, ctx context.Context, p *probeEnv, hardest latencyPath) *report.RateSearch {
	t.Helper()
	if mc.opts.Latency.QPS > 0 {
		return &report.RateSearch{QPS: mc.opts.Latency.QPS, Forced: true}
	}
	rs, err := latency.Search(ctx, p, hardest.app, hardest.name, latencyOptions(), mc.Logf)
	require.NoError(t, err)
	return rs
}

// fortioRun drives fortio through the provider's probe client and turns its result into a report row.
func fortioRun(t *testing.T, ctx context.Context, p *probeEnv, rate float64, l cluster.Load, path, conns string) report.LatencyRun {
	t.Helper()
	run, err := latency.Run(ctx, p, rate, l, path, conns, latencyOptions())
	require.NoError(t, err)
	mc.Logf("latency: %-13s %-6s %6d requests, %d errors, avg %.3f ms, p50 %.3f, p90 %.3f, p99 %.3f ms, host CPU %.0f%%",
		path, conns, run.Requests, run.Errors, run.AvgMs, run.P50Ms, run.P90Ms, run.P99Ms, 100*run.HostCPUBusy)
	return run
}

// warmups is the number of extra calls fortio makes: one per connection before the run starts.
func warmups() int64 { return int64(mc.opts.Latency.Connections) }

// sumOver adds a per-cluster counter over every cluster.
func sumOver(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// latencyPath is one path the latency suite measures: the app whose only endpoint is in cluster
// at, as reached from the client.
type latencyPath struct {
	name string // report path
	app  string
	at   *cluster.Cluster
}

// latencyPaths are local, same network (when the topology has a peer) and another network (when it
// has a remote), the last the most demanding.
func latencyPaths(p *probeEnv) []latencyPath {
	paths := []latencyPath{{report.PathLocal, cluster.EchoLocal, p.local}}
	if p.peer != nil {
		paths = append(paths, latencyPath{report.PathSameNetwork, cluster.EchoPeer, p.peer})
	}
	if p.remote != nil {
		paths = append(paths, latencyPath{report.PathCrossCluster, cluster.EchoRemote, p.remote})
	}
	return paths
}

// The rate search (2 s steps, typically four until one fails), four runs and two harness-floor
// runs; only where the data plane runs.
var _ = planned.Add("TestLatency", options.DataPlaneNeeds, func(in options.PlanIn) plan.Item {
	l := in.O.Latency
	search, rate := 0.0, fmt.Sprintf("%g QPS", l.QPS)
	if l.QPS == 0 {
		search, rate = 4*2.1, "rate search"
	}
	one := func(d time.Duration) float64 { return d.Seconds() + 0.2 } // fortio's warm-up and teardown
	return plan.Item{Expected: options.S(in.DataPlane + search + 4*one(l.Duration) + 2*one(l.FloorDuration)),
		Detail: fmt.Sprintf("%s, 4 runs of %s, 2 floor runs of %s", rate, l.Duration, l.FloorDuration)}
})

// TestLatency reproduces the data-plane half of Istio's published numbers: the same client calls a
// service in its own cluster (HBONE, one hop), one in another cluster of its network (HBONE to the
// pod's node) and one in another network (double HBONE through the remote east-west gateway),
// where the topology has them, with a new connection per request and with reused connections. It
// also runs fortio straight at the echo server to show the harness's own floor. Every request
// must succeed and take the expected path; only the other network's overhead is set beside the
// published figures.
func TestLatency(t *testing.T) {
	ctx := mc.begin(t)
	p := dataPlane(t, ctx)
	paths := latencyPaths(p)
	lat := &report.Latency{RateSearch: latencyQPS(t, ctx, p, paths[len(paths)-1])}
	rate := lat.RateSearch.QPS
	// tunnels is how many client tunnels a run of n requests opens: one per request with new
	// connections (plus fortio's warm-up call per connection), one per connection otherwise.
	tunnels := func(conns string, n int64) int64 {
		if conns == report.ConnNew {
			return n + warmups()
		}
		return int64(mc.opts.Latency.Connections)
	}

	// reached is what the destination's counter must grow by: every request and fortio's warm-up
	// call per connection, or, where the provider counts connections, the connections.
	reached := func(pc cluster.PathCounters, conns string, n int64) int64 {
		if pc.ServedConnections {
			return tunnels(conns, n)
		}
		return n + warmups()
	}

	for _, conns := range []string{report.ConnNew, report.ConnReused} {
		t.Run("direct/"+conns, func(t *testing.T) {
			run := fortioRun(t, ctx, p, rate, cluster.Load{Direct: true}, report.PathDirect, conns)
			assert.Zero(t, run.Errors)
			lat.HarnessFloor = append(lat.HarnessFloor, run)
		})
		for _, path := range paths {
			t.Run(path.name+"/"+conns, func(t *testing.T) {
				before := p.path(t, ctx)
				run := fortioRun(t, ctx, p, rate, cluster.Load{App: path.app}, path.name, conns)
				after := p.path(t, ctx)
				require.Positive(t, run.Requests)
				assert.Zero(t, run.Errors, "every request succeeds")
				assert.Equal(t, reached(after, conns, run.Requests), served(after, path.at, path.app)-served(before, path.at, path.app),
					"every request (and fortio's warm-up call per connection) reached %s", describe(path.at, path.app))
				if path.name == report.PathCrossCluster {
					viaGW := after.GatewayTunnels[path.at.Name] - before.GatewayTunnels[path.at.Name]
					assert.Equal(t, tunnels(conns, run.Requests), viaGW, "every client connection is one tunnel through the remote gateway")
					assert.Equal(t, viaGW, after.InboundViaGateway[path.at.Name]-before.InboundViaGateway[path.at.Name],
						"every tunnel the gateway forwarded arrived at the remote ztunnel with a hostname authority")
					assert.Equal(t, before.GatewayTunnels[p.local.Name], after.GatewayTunnels[p.local.Name], "the local gateway carries nothing outbound")
					assert.Equal(t, tunnels(conns, run.Requests), after.ClientDoubleHBONE-before.ClientDoubleHBONE, "the client ztunnel opened one double-HBONE tunnel per connection")
					assert.Equal(t, before.ClientHBONE, after.ClientHBONE, "and no single-HBONE tunnel")
				} else {
					assert.Equal(t, sumOver(before.GatewayTunnels), sumOver(after.GatewayTunnels), "traffic on the client's network never touches a gateway")
					assert.Equal(t, tunnels(conns, run.Requests), after.Inbound[path.at.Name]-before.Inbound[path.at.Name], "every tunnel arrived at the destination node's ztunnel")
					assert.Equal(t, before.InboundViaGateway[path.at.Name], after.InboundViaGateway[path.at.Name], "straight from the client, not through a gateway")
					assert.Equal(t, tunnels(conns, run.Requests), after.ClientHBONE-before.ClientHBONE, "the client ztunnel opened one HBONE tunnel per connection")
					assert.Equal(t, before.ClientDoubleHBONE, after.ClientDoubleHBONE, "and no double-HBONE tunnel")
				}
				lat.Runs = append(lat.Runs, run)
			})
		}
	}
	lat.Overhead = analysis.ComputeOverhead(lat.Runs)
	lat.SameNetworkOverhead = analysis.ComputeOverheadOf(lat.Runs, report.PathSameNetwork)
	lat.MedianOverhead = analysis.ComputeMedianOverhead(lat.Runs)
	for _, r := range append(append([]report.LatencyRun{}, lat.Runs...), lat.HarnessFloor...) {
		if latency.Starved(r, rate, mc.opts.Latency.Connections) {
			lat.HostCPUSaturated = true
		}
	}
	if lat.HostCPUSaturated {
		mc.Report.Warnings = append(mc.Report.Warnings, fmt.Sprintf(
			"host CPU was above %.0f%% busy, or a run fell short of %.0f QPS: these latencies measure a saturated %d-core machine, not the mesh, and are not set beside the published figures; lower -latency.qps or leave it unset",
			100*measure.HostSaturated, rate, mc.Report.Host.CPUs))
	}
	if w := tailWarning(lat.Runs); w != "" {
		mc.Logf("latency: %s", w)
		mc.Report.Warnings = append(mc.Report.Warnings, w)
	}
	mc.Report.Latency = lat
	if o := lat.Overhead; o != nil && !lat.HostCPUSaturated {
		for name, d := range map[string]*report.Delta{"new": o.New, "reused": o.Reused} {
			if d != nil {
				mc.Logf("latency: cross-cluster overhead, %s connections, %s data plane: %+.3f ms (%+.0f%%) [published, ztunnel and Envoy: new +2.2 ms (+346%%), reused +0.13 ms (+72%%)]", name, mc.Report.DataPlane, d.DeltaMs, d.Percent)
			}
		}
	}
	if o := lat.SameNetworkOverhead; o != nil && o.New != nil && o.Reused != nil {
		mc.Logf("latency: same-network overhead: new %+.3f ms (%+.0f%%), reused %+.3f ms (%+.0f%%)", o.New.DeltaMs, o.New.Percent, o.Reused.DeltaMs, o.Reused.Percent)
	}
	if p.remote != nil {
		require.NotNil(t, lat.Overhead, "overhead computed for both connection modes")
		assert.NotNil(t, lat.Overhead.New)
		assert.NotNil(t, lat.Overhead.Reused)
		require.NotNil(t, lat.MedianOverhead, "median overhead computed for both connection modes")
	}
	if p.peer != nil {
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
