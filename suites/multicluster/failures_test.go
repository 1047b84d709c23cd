package multicluster

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kubeconfig"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

// TestJoinFailurePaths checks that what goes wrong during a join ends with a clear error naming the
// cluster and carrying istiod's log, and leaves nothing running.
func TestJoinFailurePaths(t *testing.T) {
	ctx := context.Background()
	obs, istiod := observedIstiod(t)

	t.Run("unreachable remote", func(t *testing.T) {
		// A remote secret for an API server that is not there: nothing listens on the port.
		ports, err := proc.FreePorts(1)
		require.NoError(t, err)
		cfg := kubeconfig.Token("ghost", "https://127.0.0.1:"+strconv.Itoa(ports[0]), ambient.Root.CertPEM, "no-token")
		data, err := kubeconfig.Bytes(cfg)
		require.NoError(t, err)
		require.NoError(t, mesh.ApplySecret(ctx, obs, mesh.SecretFor("ghost", data)))
		t.Cleanup(func() { _ = mesh.DeleteSecret(context.Background(), obs, "ghost") })
		ghost := &cluster.Cluster{Cluster: topology.Cluster{Name: "ghost", Network: "network-ghost"}}

		_, err = waitJoined(ctx, istiod, nil, ghost, time.Now(), 8*time.Second)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "join of ghost")
		assert.Contains(t, err.Error(), "-join.timeout=8s")
		assert.Contains(t, err.Error(), "--- last 40 lines of "+istiod.Proc.LogFile())
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
	})

	t.Run("istiod killed", func(t *testing.T) {
		cache, err := bins.Default()
		require.NoError(t, err)
		bin, err := cache.Path(bins.PilotDiscovery)
		require.NoError(t, err)
		// A second istiod for the observed cluster, so the suite's own keeps running.
		doomed, err := mesh.StartIstiod(ctx, obs, mesh.IstiodOptions{
			Binary: bin, Dir: filepath.Join(t.TempDir(), "istiod"), Intermediate: ambient.Intermediates[obs.Name],
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = doomed.Stop() })
		require.NoError(t, syscall.Kill(doomed.Proc.Pid(), syscall.SIGKILL))

		start := time.Now()
		_, err = waitJoined(ctx, doomed, nil, &cluster.Cluster{Cluster: topology.Cluster{Name: "never-joined"}}, start, time.Minute)
		require.Error(t, err)
		assert.Less(t, time.Since(start), 30*time.Second, "a dead istiod fails the wait at once, not at the timeout")
		assert.Contains(t, err.Error(), "istiod "+obs.Name+" exited")
		assert.Contains(t, err.Error(), "join of never-joined")
		assert.NotContains(t, proc.Running(), doomed.Proc, "nothing of the killed istiod is left running")
		assert.Equal(t, syscall.ESRCH, syscall.Kill(doomed.Proc.Pid(), 0))
	})
}

