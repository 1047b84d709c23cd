package multicluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
)

// The rate search (2 s steps, typically four until one fails), four runs and two harness-floor
// runs; only where the data plane runs.
var _ = planned.Add("TestLatency", experiment.DataPlaneNeeds, func(in experiment.PlanIn) plan.Item {
	l := in.O.Latency
	search, rate := 0.0, fmt.Sprintf("%g QPS", l.QPS)
	if l.QPS == 0 {
		search, rate = 4*2.1, "rate search"
	}
	one := func(d time.Duration) float64 { return d.Seconds() + 0.2 } // fortio's warm-up and teardown
	return plan.Item{Expected: experiment.S(in.DataPlane + search + 4*one(l.Duration) + 2*one(l.FloorDuration)),
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
	ctx := mc.Begin(t)
	p := mc.DataPlane(t, ctx)
	paths := p.LatencyPaths()
	lat := &report.Latency{RateSearch: mc.LatencyRate(t, ctx, p, paths[len(paths)-1])}
	rate := lat.RateSearch.QPS

	for _, conns := range []string{report.ConnNew, report.ConnReused} {
		t.Run("direct/"+conns, func(t *testing.T) {
			run := mc.Fortio(t, ctx, p, rate, probe.Load{Direct: true}, report.PathDirect, conns)
			assert.Zero(t, run.Errors)
			lat.HarnessFloor = append(lat.HarnessFloor, run)
		})
		for _, path := range paths {
			t.Run(path.Name+"/"+conns, func(t *testing.T) {
				before := p.Counters(t, ctx)
				run := mc.Fortio(t, ctx, p, rate, probe.Load{App: path.App}, path.Name, conns)
				after := p.Counters(t, ctx)
				require.Positive(t, run.Requests)
				assert.Zero(t, run.Errors, "every request succeeds")
				assert.Equal(t, mc.Reached(after, conns, run.Requests), experiment.Served(after, path.At, path.App)-experiment.Served(before, path.At, path.App),
					"every request (and fortio's warm-up call per connection) reached %s", experiment.Describe(path.At, path.App))
				if path.Name == report.PathCrossCluster {
					viaGW := after.GatewayTunnels[path.At.Name] - before.GatewayTunnels[path.At.Name]
					assert.Equal(t, mc.Tunnels(conns, run.Requests), viaGW, "every client connection is one tunnel through the remote gateway")
					assert.Equal(t, viaGW, after.InboundViaGateway[path.At.Name]-before.InboundViaGateway[path.At.Name],
						"every tunnel the gateway forwarded arrived at the remote ztunnel with a hostname authority")
					assert.Equal(t, before.GatewayTunnels[p.Local.Name], after.GatewayTunnels[p.Local.Name], "the local gateway carries nothing outbound")
					assert.Equal(t, mc.Tunnels(conns, run.Requests), after.ClientDoubleHBONE-before.ClientDoubleHBONE, "the client ztunnel opened one double-HBONE tunnel per connection")
					assert.Equal(t, before.ClientHBONE, after.ClientHBONE, "and no single-HBONE tunnel")
				} else {
					assert.Equal(t, experiment.SumOver(before.GatewayTunnels), experiment.SumOver(after.GatewayTunnels), "traffic on the client's network never touches a gateway")
					assert.Equal(t, mc.Tunnels(conns, run.Requests), after.Inbound[path.At.Name]-before.Inbound[path.At.Name], "every tunnel arrived at the destination node's ztunnel")
					assert.Equal(t, before.InboundViaGateway[path.At.Name], after.InboundViaGateway[path.At.Name], "straight from the client, not through a gateway")
					assert.Equal(t, mc.Tunnels(conns, run.Requests), after.ClientHBONE-before.ClientHBONE, "the client ztunnel opened one HBONE tunnel per connection")
					assert.Equal(t, before.ClientDoubleHBONE, after.ClientDoubleHBONE, "and no double-HBONE tunnel")
				}
				lat.Runs = append(lat.Runs, run)
			})
		}
	}
	mc.ConcludeLatency(t, lat, rate)
}
