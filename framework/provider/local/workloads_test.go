package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// TestWorkloadSnapshot: workloads written through the API and captured come back in a later run's
// cluster before its API server starts: every pod Running, Ready and addressed, the same
// EndpointSlices, the services with their uids and cluster IPs, which stay allocated (a new
// service gets another). A configmap the first run wrote into a scale namespace does not come
// back; a snapshot of other inputs restores nothing, and a damaged one is removed.
func TestWorkloadSnapshot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	s := workload.Scale{Name: "test", Services: 10, Pods: snapshotMinPods, Namespaces: 2, Nodes: 2}
	set, err := workload.SnapshotSet(s, root)
	require.NoError(t, err)
	dir := t.TempDir()
	// The snapshot's key holds the cluster's address plan, so every run here takes the same
	// index: one this test holds throughout, which other test binaries starting clusters
	// meanwhile cannot take between two runs.
	held, err := claimSlots(1)
	require.NoError(t, err)
	t.Cleanup(held.release)
	start := func(set cluster.WorkloadSet) (*Provider, *cluster.Cluster) {
		p := cachedProvider(t)
		p.snapDir = dir
		p.claim = func(n int) (*slots, error) {
			require.Equal(t, 1, n)
			return &slots{indices: held.indices}, nil // no lock of its own: Destroy leaves the test's
		}
		topo, err := topology.Generate(1)
		require.NoError(t, err)
		require.NoError(t, p.Preflight(ctx, topo))
		require.NoError(t, p.PreloadWorkloads(set))
		cs, err := p.Create(ctx, topo)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Destroy(context.Background()) })
		return p, cs[0]
	}

	cold, c := start(set)
	_, restored := cold.RestoredWorkloads(c.Name)
	require.False(t, restored)
	_, err = workload.Deploy(ctx, c, s, nil)
	require.NoError(t, err)
	published, err := workload.WaitEndpointSlices(ctx, c, s, time.Minute)
	require.NoError(t, err)
	_, err = c.Client.CoreV1().ConfigMaps("scale-0").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "this-run-only"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	svc, err := c.Client.CoreV1().Services("scale-0").Get(ctx, "svc-0", metav1.GetOptions{})
	require.NoError(t, err)
	// A snapshot of the same cluster at another scale stays; one of other inputs at this scale goes.
	otherScale := filepath.Join(dir, snapshotSlot(c.Name, s.Pods+1)+"0123456789abcdef.gob.gz")
	stale := filepath.Join(dir, snapshotSlot(c.Name, s.Pods)+"0123456789abcdef.gob.gz")
	for _, f := range []string{otherScale, stale} {
		require.NoError(t, os.WriteFile(f, []byte("kept by an earlier run"), 0o644))
	}
	require.NoError(t, cold.SaveWorkloads(ctx, c))
	assert.FileExists(t, otherScale, "another scale's snapshot of the cluster was removed")
	assert.NoFileExists(t, stale, "a snapshot of other inputs at this scale was kept")
	require.NoError(t, os.Remove(otherScale))
	files, _ := filepath.Glob(filepath.Join(dir, c.Name+"-*.gob.gz"))
	require.Len(t, files, 1, "the cold run kept one snapshot")
	require.NoError(t, cold.Destroy(ctx))

	warm, c := start(set)
	from, restored := warm.RestoredWorkloads(c.Name)
	require.True(t, restored)
	assert.Contains(t, from, files[0])
	d, err := workload.CheckRestored(ctx, c, s)
	require.NoError(t, err)
	assert.Equal(t, s.Pods, d.Pods)
	got, err := workload.CountEndpointSlices(ctx, c, s)
	require.NoError(t, err)
	assert.Equal(t, published, got)
	back, err := c.Client.CoreV1().Services("scale-0").Get(ctx, "svc-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, svc.UID, back.UID)
	assert.Equal(t, svc.Spec.ClusterIP, back.Spec.ClusterIP)
	_, err = c.Client.CoreV1().ConfigMaps("scale-0").Get(ctx, "this-run-only", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a configmap of the first run came back: %v", err)
	fresh, err := c.Client.CoreV1().Services("scale-0").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "fresh"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for n := range s.Services {
		r, err := c.Client.CoreV1().Services(s.ServiceNamespace(n)).Get(ctx, workload.ServiceName(n), metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotEqual(t, r.Spec.ClusterIP, fresh.Spec.ClusterIP, "a new service got restored %s's cluster IP", r.Name)
	}
	info, err := os.Stat(files[0])
	require.NoError(t, err)
	require.NoError(t, warm.SaveWorkloads(ctx, c))
	again, err := os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, info.ModTime(), again.ModTime(), "a run that restored its workloads does not capture them again")
	require.NoError(t, warm.Destroy(ctx))

	other := set
	other.Key = "other-inputs"
	p, c := start(other)
	_, restored = p.RestoredWorkloads(c.Name)
	assert.False(t, restored, "a snapshot of other inputs was restored")
	require.NoError(t, p.Destroy(ctx))

	require.NoError(t, os.WriteFile(files[0], []byte("not a snapshot"), 0o644))
	p, c = start(set)
	_, restored = p.RestoredWorkloads(c.Name)
	assert.False(t, restored, "a damaged snapshot was restored")
	assert.NoFileExists(t, files[0])
}

// Restored workloads bring their fake nodes, whose leases node lifecycle reads from its first
// pass: each cluster's leases are renewed from its own start, not after the last wave (100
// clusters' waves took 9 minutes, and the first cluster's pods were NotReady by then). For the
// same reason each cluster is handed over (cluster.Facts.ReadyEarly) as soon as it is ready, so its
// workloads are written while later waves start.
func TestEachClusterIsKeptAndHandedOverFromItsOwnStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := cachedProvider(t)
	p.opts.Wave = 1
	kept := map[string]int{}
	var events []string
	p.startingHook = func(tc topology.Cluster) {
		p.mu.Lock()
		defer p.mu.Unlock()
		kept[tc.Name] = len(p.keepers)
		events = append(events, "starting "+tc.Name)
	}
	p.onReady = func(c *cluster.Cluster) {
		assert.NotNil(t, c.Client, "a cluster handed over can be used")
		p.mu.Lock()
		defer p.mu.Unlock()
		events = append(events, "ready "+c.Name)
	}
	startClusters(t, ctx, p, 2)
	assert.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 1}, kept, "keepers running as each cluster began to start")
	assert.Equal(t, []string{"starting cluster-1", "ready cluster-1", "starting cluster-2", "ready cluster-2"}, events)
}

// Snapshots pay where writing the workloads takes minutes: many pods in a cluster or in the run.
func TestSnapshotsApplyByClusterOrRun(t *testing.T) {
	for _, c := range []struct {
		pods, clusters int
		want           bool
	}{{1000, 1, true}, {999, 1, false}, {100, 3, false}, {100, 49, false}, {100, 50, true}, {100, 100, true}, {0, 100, false}} {
		assert.Equal(t, c.want, snapshotsApply(c.pods, c.clusters), "%d pods in each of %d clusters", c.pods, c.clusters)
	}
}

// A watched-only cluster's controllers differ from a whole one's, so the same cluster's snapshot
// is not shared between the two.
func TestSnapshotKeySaysWatchedOnly(t *testing.T) {
	topo, err := topology.Generate(2)
	require.NoError(t, err)
	w := &cluster.WorkloadSet{Pods: 100}
	whole := &Provider{snapDir: t.TempDir(), paths: map[bins.Binary]string{bins.KubeAPIServer: "a", bins.KubeControllerManager: "c"}}
	watched := &Provider{snapDir: whole.snapDir, paths: whole.paths, opts: Options{IstiodClusters: []string{topo.Clusters[0].Name}}}
	a, err := whole.snapshotFile(w, topo.Clusters[1])
	require.NoError(t, err)
	b, err := watched.snapshotFile(w, topo.Clusters[1])
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	c, err := watched.snapshotFile(w, topo.Clusters[0])
	require.NoError(t, err)
	d, err := whole.snapshotFile(w, topo.Clusters[0])
	require.NoError(t, err)
	assert.Equal(t, d, c, "the cluster the istiod runs in is whole in both runs")
}
