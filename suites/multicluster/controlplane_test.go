package multicluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
)

// A fresh istiod and a baseline, then every join, for each sequence; the probes where they run (the
// join suite starts them, for any test order).
var _ = planned.Add("TestControlPlaneJoin", nil, func(in experiment.PlanIn) plan.Item {
	probes := 0.0
	if in.DataPlaneRuns {
		probes = in.DataPlane
	}
	repeats := max(1, in.O.Join.Repeats)
	d := fmt.Sprintf("baseline + %d joins x ~%.1fs", in.Remotes, in.Join)
	if in.Remotes > 1 {
		d += fmt.Sprintf(" + %.2fs per cluster already joined", in.JoinGrowth)
	}
	if repeats > 1 {
		d = fmt.Sprintf("%d sequences of %s, each on a fresh istiod", repeats, d)
	}
	return plan.Item{Expected: experiment.S(float64(repeats)*(in.Restart+6+in.Joins(in.Remotes)) + probes), Detail: d}
})

// TestControlPlaneJoin reproduces the control-plane half of Istio's published ambient multicluster
// numbers (experiment.MeasureJoins): clusters join the mesh one at a time while one istiod, fresh,
// is measured.
func TestControlPlaneJoin(t *testing.T) {
	ctx := mc.Begin(t)
	mc.ProbesInPlace(t)
	pr := mc.MeasureJoins(t, ctx).PerRemoteCluster
	if pr == nil {
		return // nothing joined: a mesh of one
	}
	// Sane bounds, not targets: a remote cluster must cost istiod some memory, and not gigabytes.
	assert.Greater(t, pr.LiveHeapBytes.Value, 0.0, "each remote cluster adds live heap")
	assert.Less(t, pr.LiveHeapBytes.Value, 2e9, "per-remote live heap")
}

// Right after the join suite (go test's default order) it keeps that istiod, which has held only
// the clusters it still holds; in another order it pays a restart and the joins too.
var _ = planned.Add("TestControlPlaneLeave", nil, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(1 + float64(in.Remotes)*(0.4+in.Pods/4000*3)),
		Detail: fmt.Sprintf("%d leaves (after the join suite: its istiod, kept)", in.Remotes)}
})

// TestControlPlaneLeave joins every cluster (unmeasured), then removes them one at a time (newest
// first) and checks that istiod lets each one go: the remote cluster leaves istiod's managed set
// and the ztunnel-like client loses its network; memory after each leave is recorded.
func TestControlPlaneLeave(t *testing.T) {
	ctx := mc.Begin(t)
	mc.ProbesInPlace(t)
	obs := mc.ObservedCluster()
	istiod, measured := mc.IstiodFor(t, ctx, mc.EveryCluster()...)
	w := mc.StartWatcher(t, ctx, obs, istiod)
	mc.WaitHolds(t, ctx, w, mc.EveryCluster()[1:]...)
	cp := mc.ControlPlane()
	cp.LeaveIstiod, cp.Leaves = measured, nil
	joined := mc.Mesh.Joined()
	for k := len(joined) - 1; k >= 0; k-- {
		name := joined[k]
		if name == obs.Name {
			continue
		}
		c := mc.Cluster(name)
		start := time.Now()
		require.NoError(t, mc.Mesh.Leave(ctx, name))
		require.NoError(t, mc.Expect().WaitLeft(ctx, istiod, w, c, mc.Opts.Join.Timeout))
		elapsed := time.Since(start)
		// One sample and the live heap: a leave's memory is what stayed, not a slope to fit.
		settled, err := istiod.Sampler().Settled(ctx, 1, join.SampleInterval)
		require.NoError(t, err)
		after := mc.Scrape(t, ctx, istiod)
		remaining := len(mc.Mesh.Joined()) - 1
		assert.Equal(t, float64(remaining), after.ManagedClusters["remote"], "managed remote clusters after %s left", name)
		assert.NotContains(t, after.RemoteClusters(), name)
		cp.Leaves = append(cp.Leaves, report.Leave{
			Cluster: name, RemoteClusters: remaining, ManagedRemoteClusters: int(after.ManagedClusters["remote"]),
			Seconds: report.F(elapsed.Seconds()), RSSBytes: report.F(settled.RSSBytes), LiveHeapBytes: report.F(settled.LiveHeapBytes),
		})
		mc.Profile(istiod, "after-leave-"+name)
		mc.Logf("leave: %s gone in %.2fs; istiod live heap %.0f MB, rss %.0f MB, %d remote clusters left",
			name, elapsed.Seconds(), settled.LiveHeapBytes/1e6, settled.RSSBytes/1e6, remaining)
	}
}
