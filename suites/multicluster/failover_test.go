package multicluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/traffic"
	"github.com/ambientmc/ambientmc/topology"
)

var _ = planned.Add("TestFailover", experiment.DataPlaneNeeds, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(in.DataPlane + 2), Detail: "failover and failback at 100 requests/s"}
})

// TestFailover: echo-failover has endpoints in the client's cluster and one other and PreferClose,
// so from the client's cluster traffic stays local. When the local endpoint turns unready, istiod
// marks it unhealthy and traffic moves to the other cluster: through its gateway when it is on
// another network, straight to its node's ztunnel when it shares the client's; when the local one
// recovers, traffic returns. Times run from the readiness change to the first request the other
// cluster served; the request interval is their resolution.
func TestFailover(t *testing.T) {
	ctx := mc.Begin(t)
	p := mc.DataPlane(t, ctx)
	target := p.Setup.Failover()
	relation := topology.RelationOf(p.Local.Cluster, target.Cluster)
	const interval = 10 * time.Millisecond
	loop := traffic.Start(ctx, p, probe.EchoFailover, interval)
	defer loop.Stop()

	// Steady state: everything stays in the client's cluster.
	steadyFrom, gwBefore := time.Now(), p.Counters(t, ctx).GatewayTunnels[target.Name]
	time.Sleep(time.Second)
	steady := traffic.Count(loop.Since(steadyFrom))
	require.Positive(t, steady[p.Local.Name], "traffic reaches the local endpoint")
	assert.Zero(t, steady[target.Name], "with a healthy local endpoint nothing crosses to %s", target.Name)
	assert.Equal(t, gwBefore, p.Counters(t, ctx).GatewayTunnels[target.Name], "and nothing goes through the gateway")

	unready := time.Now()
	require.NoError(t, p.SetReady(ctx, probe.EchoFailover, p.Local.Name, false))
	failover, err := loop.FirstServedBy(ctx, target.Name, unready, 30*time.Second)
	require.NoError(t, err)
	// Once moved, nothing reaches the unready local endpoint any more.
	moved, at := time.Now(), p.Counters(t, ctx)
	time.Sleep(500 * time.Millisecond)
	assert.Zero(t, traffic.Count(loop.Since(moved))[p.Local.Name], "no traffic to the unready local endpoint")
	now := p.Counters(t, ctx)
	if relation == topology.OtherNetwork {
		assert.Greater(t, now.GatewayTunnels[target.Name], at.GatewayTunnels[target.Name], "failed-over traffic rides the remote gateway")
	} else {
		assert.Equal(t, at.GatewayTunnels[target.Name], now.GatewayTunnels[target.Name], "failed-over traffic on the client's network skips the gateway")
		assert.Greater(t, now.Inbound[target.Name], at.Inbound[target.Name], "and goes straight to the peer's node")
	}

	ready := time.Now()
	require.NoError(t, p.SetReady(ctx, probe.EchoFailover, p.Local.Name, true))
	failback, err := loop.FirstServedBy(ctx, p.Local.Name, ready, 30*time.Second)
	require.NoError(t, err)
	back := time.Now()
	time.Sleep(500 * time.Millisecond)
	assert.Zero(t, traffic.Count(loop.Since(back))[target.Name], "after recovery nothing crosses any more")

	during := traffic.Count(loop.Since(unready))
	var sent int64
	for _, n := range during {
		sent += n
	}
	failed := during[""]
	mc.Logf("failover: moved to %s in %.3fs, back in %.3fs (resolution %s); %d of %d requests failed during the switch",
		target.Name, failover.Seconds(), failback.Seconds(), interval, failed, sent)
	// Bounded, not zero: requests in flight while istiod pushes the change may fail.
	assert.LessOrEqual(t, failed, sent/10+5, "failed requests during the switch stay bounded")
	mc.Report.Failover = &report.Failover{
		Service: probe.EchoFailover, Target: target.Name, Relation: string(relation), FailoverSeconds: failover.Seconds(), FailbackSeconds: failback.Seconds(),
		Requests: sent, FailedRequests: failed, ResolutionSeconds: interval.Seconds(),
	}
}
