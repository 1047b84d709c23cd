package local

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// ClustersForTest starts n real local clusters (kube-apiserver on a shared etcd, RBAC on, and
// kube-controller-manager) that stop when tb ends, or skips tb when the binaries are not built:
// building them takes minutes (`make bins`). Other packages' tests use it to run against real
// API servers.
func ClustersForTest(tb testing.TB, n int) (*Provider, []*cluster.Cluster) {
	tb.Helper()
	return clustersForTest(tb, n, Options{})
}

// APIServersForTest is ClustersForTest without the controller-managers, for tests that play the
// controllers themselves (writing a Deployment's or a DaemonSet's status).
func APIServersForTest(tb testing.TB, n int) (*Provider, []*cluster.Cluster) {
	tb.Helper()
	return clustersForTest(tb, n, Options{NoControllers: true})
}

func clustersForTest(tb testing.TB, n int, o Options) (*Provider, []*cluster.Cluster) {
	tb.Helper()
	o.RunDir, o.Log, o.ReadyTimeout = tb.TempDir(), io.Discard, 2*time.Minute
	p, missing, err := NewIfBuilt(o)
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
