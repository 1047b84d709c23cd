// Package localtest starts real local clusters for other packages' tests. Only tests import it, so
// the production build carries neither it nor package testing.
package localtest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/provider/local"
	"github.com/ambientmc/ambientmc/topology"
)

// Clusters starts n real local clusters (kube-apiserver on a shared etcd, RBAC on, and
// kube-controller-manager) that stop when tb ends, or skips tb when the binaries are not built:
// building them takes minutes (`make bins`).
func Clusters(tb testing.TB, n int) (*local.Provider, []*cluster.Cluster) {
	tb.Helper()
	return start(tb, n, local.Options{})
}

// APIServers is Clusters without the controller-managers, for tests that play the controllers
// themselves (writing a Deployment's or a DaemonSet's status).
func APIServers(tb testing.TB, n int) (*local.Provider, []*cluster.Cluster) {
	tb.Helper()
	return start(tb, n, local.Options{NoControllers: true})
}

// ClustersWithNodeGrace is Clusters whose controller-managers call a node NotReady after grace
// without a lease renewal (kube-controller-manager's default, as on kind, is 50 s), instead of
// the local provider's longer grace: for tests that the fake nodes' leases keep them Ready.
func ClustersWithNodeGrace(tb testing.TB, n int, grace time.Duration) (*local.Provider, []*cluster.Cluster) {
	tb.Helper()
	return start(tb, n, local.Options{NodeMonitorGrace: grace})
}

func start(tb testing.TB, n int, o local.Options) (*local.Provider, []*cluster.Cluster) {
	tb.Helper()
	o.RunDir, o.Log, o.ReadyTimeout, o.APIServerGOGC = tb.TempDir(), io.Discard, 2*time.Minute, local.SmallClustersGOGC
	p, missing, err := local.NewIfBuilt(o)
	if err != nil {
		tb.Fatal(err)
	}
	if len(missing) > 0 {
		tb.Skipf("binaries not built (%v): run `make bins`", missing)
	}
	topo, err := topology.Generate(n)
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Preflight(ctx, topo); err != nil {
		tb.Fatal(err)
	}
	cs, err := p.Create(ctx, topo)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Destroy(context.Background()) })
	if len(cs) != n {
		tb.Fatalf("started %d clusters, want %d", len(cs), n)
	}
	return p, cs
}
