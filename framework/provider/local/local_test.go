package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

// cachedProvider returns a provider whose binaries are already built, or skips: building them takes
// minutes (`make bins`), and CI runs these tests after building.
func cachedProvider(tb testing.TB) *Provider {
	tb.Helper()
	p, missing, err := NewIfBuilt(Options{RunDir: tb.TempDir(), Log: io.Discard, ReadyTimeout: 2 * time.Minute, APIServerGOGC: SmallClustersGOGC})
	require.NoError(tb, err)
	if len(missing) > 0 {
		tb.Skipf("binaries not built (%v): run `make bins`", missing)
	}
	return p
}

// startClusters creates n clusters with p (Preflight, then Create) and destroys them when tb ends.
func startClusters(tb testing.TB, ctx context.Context, p *Provider, n int) []*cluster.Cluster {
	tb.Helper()
	cs, _ := startClustersWithCRDs(tb, ctx, p, n, nil)
	return cs
}

// startClustersWithCRDs is startClusters that preloads set (PreloadCRDs, between Preflight and
// Create) unless it is nil, and returns the slimmed set for the test to apply.
func startClustersWithCRDs(tb testing.TB, ctx context.Context, p *Provider, n int, set crds.Set) ([]*cluster.Cluster, []*unstructured.Unstructured) {
	tb.Helper()
	topo, err := topology.Generate(n)
	require.NoError(tb, err)
	require.NoError(tb, p.Preflight(ctx, topo))
	var slim []*unstructured.Unstructured
	if set != nil {
		slim, err = p.PreloadCRDs(set)
		require.NoError(tb, err)
	}
	cs, err := p.Create(ctx, topo)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = p.Destroy(context.Background()) })
	return cs, slim
}

// pinnedCRDs reads the Istio and Gateway API CRDs of the modules go.mod pins.
func pinnedCRDs(tb testing.TB, ctx context.Context) crds.Set {
	tb.Helper()
	root, err := bins.SourceRoot()
	require.NoError(tb, err)
	set, err := crds.Load(ctx, root)
	require.NoError(tb, err)
	return set
}

func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

func TestCreateAndDestroyRealCluster(t *testing.T) {
	p := cachedProvider(t)
	ctx := context.Background()
	cs := startClusters(t, ctx, p, 1)
	require.Len(t, cs, 1)
	c := cs[0]
	assert.Regexp(t, `^v1\.\d+\.\d+$`, c.KubernetesVersion, "version stamped at build time")

	// Credentials are private.
	dir := filepath.Dir(c.Kubeconfig)
	for _, f := range []string{c.Kubeconfig, c.InternalKubeconfig, filepath.Join(dir, "tokens.csv"), filepath.Join(dir, "sa.key"),
		filepath.Join(dir, "kube-controller-manager.kubeconfig"), filepath.Join(dir, "egress-selector.yaml")} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), f)
	}

	var pids []int
	for _, pr := range append(p.Processes()[c.Name], p.SharedProcesses()...) {
		pids = append(pids, pr.Pid())
	}
	require.Len(t, pids, 3, "kube-apiserver, kube-controller-manager and the shared etcd")
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.Processes()[c.Name][0].Pid()))
	require.NoError(t, err)
	assert.Contains(t, strings.Split(string(environ), "\x00"), fmt.Sprintf("GOGC=%d", SmallClustersGOGC), "the API server runs with Options.APIServerGOGC")
	require.Len(t, p.StartWaves(), 1)
	assert.Equal(t, []string{c.Name}, p.StartWaves()[0].Clusters)
	egress := p.egress[0].Socket()
	require.FileExists(t, egress)
	require.NoError(t, p.Destroy(ctx))
	for _, pid := range pids {
		assert.True(t, gone(pid), "pid %d stopped", pid)
	}
	assert.Empty(t, proc.Running())
	assert.NoFileExists(t, egress, "the egress proxy's socket is removed")
}

// TestCreateFailsWithLogTailWhenEtcdCrashes uses a fake etcd (a script that exits at once): a real
// etcd crash cannot be provoked on demand. Everything else is real.
func TestCreateFailsWithLogTailWhenEtcdCrashes_FakeEtcd(t *testing.T) {
	p := cachedProvider(t)
	topo, err := topology.Generate(2)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, p.Preflight(ctx, topo))
	fake := filepath.Join(t.TempDir(), "etcd")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'etcd: fatal: disk on fire' >&2\nexit 2\n"), 0o755))
	p.paths[bins.Etcd] = fake

	_, err = p.Create(ctx, topo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd exited before it was ready")
	assert.Contains(t, err.Error(), "disk on fire", "the log tail is attached")
	assert.Empty(t, proc.Running(), "nothing left running after a failed create")
}

func TestPreflightRejectsTopologyTheProviderCannotBuild(t *testing.T) {
	p := New(Options{RunDir: t.TempDir()})
	topo, err := topology.Parse([]byte(`[{"kind":"Kubernetes","clusterName":"a"},{"kind":"Kubernetes","clusterName":"b","primaryClusterName":"a"}]`), "remote.json")
	require.NoError(t, err)
	err = p.Preflight(context.Background(), topo)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "remote.json")
	assert.Contains(t, err.Error(), "local")
}

// BenchmarkClusterStart reports how long 1, 5 and 10 clusters take to serve the API when started
// together, and the memory each cluster's processes hold right after.
func BenchmarkClusterStart(b *testing.B) {
	for _, n := range []int{1, 5, 10} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			for range b.N {
				p := cachedProvider(b)
				topo, err := topology.Generate(n)
				require.NoError(b, err)
				ctx := context.Background()
				require.NoError(b, p.Preflight(ctx, topo))
				start := time.Now()
				_, err = p.Create(ctx, topo)
				require.NoError(b, err)
				elapsed := time.Since(start)
				var apiRSS, etcdRSS float64
				for _, procs := range p.Processes() {
					for _, pr := range procs {
						rss, err := pr.RSSBytes()
						require.NoError(b, err)
						apiRSS += float64(rss)
					}
				}
				for _, pr := range p.SharedProcesses() {
					rss, err := pr.RSSBytes()
					require.NoError(b, err)
					etcdRSS += float64(rss)
				}
				require.NoError(b, p.Destroy(ctx))
				b.ReportMetric(elapsed.Seconds(), "ready-s")
				b.ReportMetric(apiRSS/float64(n)/1e6, "apiserver-MB/cluster")
				b.ReportMetric(etcdRSS/float64(n)/1e6, "etcd-MB/cluster")
			}
		})
	}
}

func TestPreflightSaysItIgnoresKubeconfigsOnce(t *testing.T) {
	p := cachedProvider(t)
	var log strings.Builder
	p.opts.Log = &log
	topo, err := topology.Parse([]byte(`[{"kind":"Kubernetes","clusterName":"a","meta":{"kubeconfig":"/x/a"}},{"kind":"Kubernetes","clusterName":"b","meta":{"kubeconfig":"/x/b"}}]`), "prow.json")
	require.NoError(t, err)
	require.NoError(t, p.Preflight(context.Background(), topo))
	assert.Equal(t, 1, strings.Count(log.String(), "ignores the kubeconfig paths in prow.json"), log.String())
}
