package multicluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kubeconfig"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

// TestJoinFailurePaths checks that what goes wrong during a join ends with a clear error naming the
// cluster and carrying istiod's log, and leaves nothing running.
func TestJoinFailurePaths(t *testing.T) {
	ctx := context.Background()
	obs, istiod := observedIstiod(t)

	t.Run("unreachable remote", func(t *testing.T) {
		// A second istiod for the observed cluster reads remote clusters from a kubeconfig
		// directory, so the suite's own istiod never sees the broken cluster (istiod's secret
		// controller can stall when a still-syncing remote is deleted).
		dir := filepath.Join(t.TempDir(), "remotes")
		require.NoError(t, os.MkdirAll(dir, 0o700))
		isolated := extraIstiod(t, obs, "PILOT_MULTICLUSTER_KUBECONFIG_PATH="+dir)
		// A kubeconfig for an API server that is not there: nothing listens on the port.
		ports, err := proc.FreePorts(1)
		require.NoError(t, err)
		cfg := kubeconfig.Token("ghost", "https://127.0.0.1:"+strconv.Itoa(ports[0]), ambient.Root.CertPEM, "no-token")
		require.NoError(t, kubeconfig.WriteFile(filepath.Join(dir, "ghost"), cfg))
		ghost := &cluster.Cluster{Cluster: topology.Cluster{Name: "ghost", Network: "network-ghost"}}

		_, err = waitJoined(ctx, isolated, nil, ghost, time.Now(), 8*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "join of ghost")
		assert.Contains(t, err.Error(), "-join.timeout=8s")
		assert.Contains(t, err.Error(), "--- last 40 lines of "+isolated.LogFile())
	})

	t.Run("join timeout", func(t *testing.T) {
		if len(mc.Clusters) < 2 {
			t.Skip("needs two clusters")
		}
		leaveAll(t, istiod)
		t.Cleanup(func() { leaveAll(t, istiod) })
		require.NoError(t, ambient.Join(ctx, obs.Name))
		other := mc.Clusters[slices.IndexFunc(mc.Clusters, func(c *cluster.Cluster) bool { return c.Name != obs.Name })]
		start := time.Now()
		require.NoError(t, ambient.Join(ctx, other.Name))
		_, err := waitJoined(ctx, istiod, nil, other, start, time.Millisecond)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "join of "+other.Name)
		assert.Contains(t, err.Error(), "-join.timeout=1ms")
		// Let the join finish before the cleanup removes it: deleting a remote secret while istiod
		// is still syncing that cluster can stall istiod's secret controller for minutes.
		_, err = waitJoined(ctx, istiod, nil, other, start, mc.Flags.JoinTimeout)
		require.NoError(t, err)
	})

	t.Run("istiod killed", func(t *testing.T) {
		doomed := extraIstiod(t, obs)
		require.NoError(t, doomed.Kill())

		start := time.Now()
		_, err := waitJoined(ctx, doomed, nil, &cluster.Cluster{Cluster: topology.Cluster{Name: "never-joined"}}, start, time.Minute)
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
	})
}

// extraIstiod starts a second istiod for cluster c (the suite's own keeps running) and stops it
// when the test ends; providers that cannot run one skip the test.
func extraIstiod(t *testing.T, c *cluster.Cluster, env ...string) cluster.Istiod {
	t.Helper()
	i, err := mc.Provider.ControlPlane().StartIstiod(context.Background(), c, cluster.IstiodOptions{
		Name: "extra", Binary: mc.IstiodPath(), Dir: filepath.Join(t.TempDir(), "istiod"), CA: ambient.Intermediates[c.Name], Env: env,
	})
	if errors.Is(err, cluster.ErrUnsupported) {
		t.Skipf("provider %s cannot run a second istiod: %v", mc.Provider.Name(), err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = i.Stop() })
	return i
}
