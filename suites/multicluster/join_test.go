package multicluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
)

// The join method (framework/join) as the suites use it on the suite's mesh.

// expect is what a ztunnel-like client of one of the suite mesh's istiods holds.
func expect() join.Expect {
	return join.Expect{Scale: mc.scale, Clusters: mc.Clusters, Members: mc.mesh.Joined, Gateway: mc.mesh.GatewayAddress}
}

// joinOptions are the join flags as the method reads them.
func joinOptions() join.Options {
	j := mc.opts.Join
	return join.Options{Settle: j.Settle, Steady: j.Steady, Samples: j.Samples, Timeout: j.Timeout}
}

// startWatcher connects a ztunnel-like xDS client to istiod as one of c's ztunnels; it closes when
// the test ends.
func startWatcher(t *testing.T, ctx context.Context, c *cluster.Cluster, i join.Istiod) *xdswatch.Watcher {
	t.Helper()
	w, err := join.StartWatcher(ctx, c, i, mc.mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

// startLoadClient connects a ztunnel-like client that only adds istiod's push work; it closes
// when the test ends.
func startLoadClient(t *testing.T, ctx context.Context, c *cluster.Cluster, i join.Istiod) {
	t.Helper()
	w, err := join.StartLoadClient(ctx, c, i, mc.mesh.Intermediates[c.Name], t.TempDir())
	require.NoError(t, err)
	t.Cleanup(w.Close)
}

// waitHolds waits until the watcher holds every named cluster.
func waitHolds(t *testing.T, ctx context.Context, w *xdswatch.Watcher, names ...string) {
	t.Helper()
	var cs []*cluster.Cluster
	for _, n := range names {
		cs = append(cs, mc.Cluster(n))
	}
	require.NoError(t, expect().WaitHolds(ctx, w, mc.opts.Join.Timeout, cs...))
}

// joinAndWait joins c to the mesh and waits for the observed istiod to converge on it.
func joinAndWait(t *testing.T, ctx context.Context, i join.Istiod, w *xdswatch.Watcher, c *cluster.Cluster) (join.Convergence, time.Time) {
	t.Helper()
	start := time.Now()
	require.NoError(t, mc.mesh.Join(ctx, c.Name))
	conv, err := expect().WaitJoined(ctx, i, w, c, start, mc.opts.Join.Timeout)
	require.NoError(t, err)
	return conv, start
}

// readCPU reads istiod's CPU time or fails the test naming it.
func readCPU(t *testing.T, ctx context.Context, i join.Istiod) measure.CPUReading {
	t.Helper()
	r, err := join.ReadCPU(ctx, i)
	require.NoError(t, err)
	return r
}

// scrape reads istiod's metrics or fails the test naming it.
func scrape(t *testing.T, ctx context.Context, i join.Istiod) *measure.Metrics {
	t.Helper()
	m, err := i.Sampler().Scrape(ctx)
	require.NoError(t, err, "scraping istiod %s", i.Cluster())
	return m
}
