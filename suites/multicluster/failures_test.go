package multicluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/istiodcheck"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/kubeconfig"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/subtest"
	"github.com/ambientmc/ambientmc/topology"
)

var _ = planned.Add("TestJoinFailurePaths", nil, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(in.Restart + 4), Detail: "at once: an unreachable remote (5s wait), a join timeout, a killed istiod"}
})

// TestJoinFailurePaths checks that what goes wrong during a join ends with a clear error naming the
// cluster and carrying istiod's log, and leaves nothing running. Each path has an istiod of its
// own and mostly waits on a timer, so they run at once.
func TestJoinFailurePaths(t *testing.T) {
	ctx := mc.Begin(t)
	obs := mc.ObservedCluster()
	subtest.Concurrently(t,
		subtest.Case{Name: "unreachable remote", Run: func(t *testing.T) { failUnreachableRemote(t, ctx, obs) }},
		subtest.Case{Name: "join timeout", Run: func(t *testing.T) { failJoinTimeout(t, ctx, obs) }},
		subtest.Case{Name: "istiod killed", Run: func(t *testing.T) { failIstiodKilled(t, ctx, obs) }},
	)
}

func failUnreachableRemote(t *testing.T, ctx context.Context, obs *cluster.Cluster) {
	// A fresh istiod for the observed cluster reads remote secrets from its own namespace
	// (istiodcheck.Isolated), so the suite's own istiod never manages the broken cluster. Its remote
	// sync timeout is short, so that istiod itself says it gave up on the cluster.
	isolated := mc.Checks().Isolated(t, ctx, obs, "PILOT_REMOTE_CLUSTER_TIMEOUT="+ghostSyncTimeout.String())
	// A kubeconfig for an API server that is not there: nothing listens on the port.
	ports, err := proc.FreePorts(1)
	require.NoError(t, err)
	data, err := kubeconfig.Bytes(kubeconfig.Token("ghost", "https://127.0.0.1:"+strconv.Itoa(ports[0]), mc.Mesh.Root.CertPEM, "no-token"))
	require.NoError(t, err)
	secret := mesh.SecretFor("ghost", data)
	secret.Namespace = isolated.Namespace()
	isolated.Add(t, secret)
	ghost := &cluster.Cluster{Cluster: topology.Cluster{Name: "ghost", Network: "network-ghost"}}

	_, err = mc.Expect().WaitJoined(ctx, isolated.Istiod, nil, ghost, time.Now(), ghostWait)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "join of ghost")
	assert.Contains(t, err.Error(), "-join.timeout="+ghostWait.String())
	assert.Contains(t, err.Error(), "--- last 40 lines of "+isolated.LogFile())

	// istiod's own view: it manages ghost, never synced it, and counted the sync timeout.
	m := mc.Scrape(t, ctx, isolated.Istiod)
	assert.Equal(t, measure.StatusTimeout, m.RemoteStatus["ghost"], "istiod reports the unreachable cluster's sync as timed out")
	assert.Equal(t, 1.0, m.ManagedClusters["remote"], "istiod manages the unreachable cluster")
	assert.GreaterOrEqual(t, clusterSample(m, metricSyncTimeouts, "ghost"), 1.0, "%s counts ghost's timeout", metricSyncTimeouts)
}

func failJoinTimeout(t *testing.T, ctx context.Context, obs *cluster.Cluster) {
	if len(mc.Clusters) < 2 {
		t.Skip("needs two clusters")
	}
	// A fresh istiod reads the other cluster through a delaying proxy, so its sync takes
	// seconds; a limit inside that delay must give up while istiod still reports syncing.
	// The suite's own istiod never sees this cluster, and the fresh one goes with the test.
	other := istiodcheck.OtherCluster(mc.Clusters, obs)
	fresh := mc.Checks().Isolated(t, ctx, obs)
	slow, _ := fresh.Slow(t, other, other.Name, istiodcheck.SlowSync)
	fresh.Add(t, slow)
	// The limit counts from istiod's taking up the secret.
	_, _, err := join.WaitStatus(ctx, fresh.Istiod, other.Name, measure.StatusSyncing, 10*time.Second)
	require.NoError(t, err)
	start := time.Now()
	_, err = mc.Expect().WaitJoined(ctx, fresh.Istiod, nil, other, start, joinLimit)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "join of "+other.Name)
	assert.Contains(t, err.Error(), "-join.timeout="+joinLimit.String())
	assert.Contains(t, err.Error(), `status="syncing"} 1`, "the wait saw the cluster still syncing when it gave up")
	// The limit was inside the delay, not a join that could never finish.
	conv, err := mc.Expect().WaitJoined(ctx, fresh.Istiod, nil, other, start, mc.Opts.Join.Timeout)
	require.NoError(t, err)
	assert.Greater(t, conv.Sync, joinLimit, "the slowed join took longer than the limit it failed")
}

func failIstiodKilled(t *testing.T, ctx context.Context, obs *cluster.Cluster) {
	doomed := mc.ExtraIstiod(t, ctx, obs, "")
	require.NoError(t, doomed.Kill())

	start := time.Now()
	_, err := mc.Expect().WaitJoined(ctx, doomed, nil, &cluster.Cluster{Cluster: topology.Cluster{Name: "never-joined"}}, start, time.Minute)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 30*time.Second, "a dead istiod fails the wait at once, not at the timeout")
	assert.Contains(t, err.Error(), "istiod "+obs.Name+" exited")
	assert.Contains(t, err.Error(), "join of never-joined")
	select {
	case <-doomed.Done():
		assert.Error(t, doomed.ExitErr(), "the killed istiod's exit is reported")
	case <-time.After(10 * time.Second):
		t.Fatal("the killed istiod is still running")
	}
}

const (
	// ghostSyncTimeout is PILOT_REMOTE_CLUSTER_TIMEOUT for the istiod that meets an unreachable
	// cluster: short enough to pass inside the test's wait, ghostWait.
	ghostSyncTimeout = 2 * time.Second
	ghostWait        = 5 * time.Second
	// joinLimit is the join timeout used against a sync slowed to several seconds (slowSync).
	joinLimit = time.Second
	// metricSyncTimeouts counts remote syncs that passed PILOT_REMOTE_CLUSTER_TIMEOUT, per cluster
	// (pkg/kube/multicluster/secretcontroller.go).
	metricSyncTimeouts = "remote_cluster_sync_timeouts_total"
)

// clusterSample is metric's sample for cluster in m, or -1 when istiod exports none.
func clusterSample(m *measure.Metrics, metric, cluster string) float64 {
	for _, s := range m.Families[metric].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == measure.LabelCluster && l.GetValue() == cluster {
				return s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue()
			}
		}
	}
	return -1
}
