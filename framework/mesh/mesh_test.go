package mesh

import (
	"context"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/topology"
)

// fakeMesh is a Mesh over fake clientsets, with the remote secrets Install would have prepared:
// Join and Leave only move those secrets, so their bookkeeping needs no API server.
func fakeMesh(primaries []string, remotes map[string]string) *Mesh {
	m := &Mesh{secrets: map[string]*corev1.Secret{}}
	add := func(name, primary string) {
		c := &cluster.Cluster{Cluster: topology.Cluster{Name: name, Primary: primary}, Client: fake.NewClientset()}
		m.Clusters = append(m.Clusters, c)
		m.secrets[name] = SecretFor(name, []byte("kubeconfig of "+name))
	}
	for _, p := range primaries {
		add(p, p)
	}
	names := make([]string, 0, len(remotes))
	for r := range remotes {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		add(r, remotes[r])
	}
	return m
}

// remoteSecrets lists the clusters whose remote secret is in c's istio-system.
func remoteSecrets(t *testing.T, c *cluster.Cluster) []string {
	t.Helper()
	list, err := c.Client.CoreV1().Secrets(SystemNamespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, s := range list.Items {
		for k := range s.Data {
			assert.Equal(t, RemoteSecretName(k), s.Name, "secret named after its cluster key")
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// others is joined minus self, sorted.
func others(joined []string, self string) []string {
	var out []string
	for _, j := range joined {
		if j != self {
			out = append(out, j)
		}
	}
	sort.Strings(out)
	return out
}

// checkFullMesh: every joined primary reads every other joined cluster, and nothing else holds a
// remote secret.
func checkFullMesh(t *testing.T, m *Mesh) {
	t.Helper()
	joined := m.Joined()
	for _, c := range m.Clusters {
		got := remoteSecrets(t, c)
		if c.IsPrimary() && slices.Contains(joined, c.Name) {
			assert.Equal(t, others(joined, c.Name), got, "remote secrets in %s with %v joined", c.Name, joined)
		} else {
			assert.Empty(t, got, "remote secrets in %s (joined %v, primary %t)", c.Name, joined, c.IsPrimary())
		}
	}
}

func TestJoinKeepsTheMeshFullyMultiPrimary(t *testing.T) {
	ctx := context.Background()
	m := fakeMesh([]string{"cluster-1", "cluster-2", "cluster-3"}, map[string]string{"cluster-4": "cluster-1"})
	for k, name := range []string{"cluster-1", "cluster-2", "cluster-4", "cluster-3"} {
		require.NoError(t, m.Join(ctx, name))
		assert.Len(t, m.Joined(), k+1)
		checkFullMesh(t, m)
	}
	assert.Equal(t, []string{"cluster-1", "cluster-2", "cluster-4", "cluster-3"}, m.Joined(), "join order kept")
	// A remote cluster's istiod is its primary's: it holds no secrets, but every primary reads it.
	assert.Empty(t, remoteSecrets(t, m.Cluster("cluster-4")))
	assert.Contains(t, remoteSecrets(t, m.Cluster("cluster-3")), "cluster-4")

	assert.ErrorContains(t, m.Join(ctx, "cluster-2"), "already in the mesh")
	assert.ErrorContains(t, m.Join(ctx, "cluster-9"), "unknown cluster")
	assert.Len(t, m.Joined(), 4, "failed joins record nothing")
}

func TestLeaveRemovesSecretsBothWays(t *testing.T) {
	ctx := context.Background()
	m := fakeMesh([]string{"cluster-1", "cluster-2", "cluster-3"}, nil)
	for _, name := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		require.NoError(t, m.Join(ctx, name))
	}
	require.NoError(t, m.Leave(ctx, "cluster-2"))
	assert.Equal(t, []string{"cluster-1", "cluster-3"}, m.Joined())
	checkFullMesh(t, m)
	assert.Empty(t, remoteSecrets(t, m.Cluster("cluster-2")), "the leaver keeps no secrets of the others")

	assert.ErrorContains(t, m.Leave(ctx, "cluster-2"), "not in the mesh")
	// It can come back, and the mesh is whole again.
	require.NoError(t, m.Join(ctx, "cluster-2"))
	checkFullMesh(t, m)
	for _, name := range []string{"cluster-3", "cluster-2", "cluster-1"} {
		require.NoError(t, m.Leave(ctx, name))
		checkFullMesh(t, m)
	}
	assert.Empty(t, m.Joined())
}

// What each primary's istiod has held and let go of is what a measurement "from nothing" asks.
func TestHeldAndDroppedFollowJoinsAndLeaves(t *testing.T) {
	ctx := context.Background()
	m := fakeMesh([]string{"cluster-1", "cluster-2", "cluster-3"}, nil)
	for _, name := range []string{"cluster-1", "cluster-2", "cluster-3"} {
		require.NoError(t, m.Join(ctx, name))
	}
	assert.Equal(t, []string{"cluster-2", "cluster-3"}, m.Held("cluster-1"))
	assert.Empty(t, m.Dropped("cluster-1"), "nothing left yet")
	require.NoError(t, m.Leave(ctx, "cluster-3"))
	assert.Equal(t, []string{"cluster-2", "cluster-3"}, m.Held("cluster-1"), "held since it started, left or not")
	assert.Equal(t, []string{"cluster-3"}, m.Dropped("cluster-1"))
	assert.Equal(t, []string{"cluster-3"}, m.Dropped("cluster-2"))
	assert.Equal(t, []string{"cluster-1", "cluster-2"}, m.Dropped("cluster-3"), "the leaver let the others go")
	require.NoError(t, m.Join(ctx, "cluster-3"))
	assert.Equal(t, []string{"cluster-3"}, m.Dropped("cluster-1"), "a rejoin does not undo a leave")
}

// Where istiod runs on this host its CPU comes from the scheduler's counters; in a pod, from
// process_cpu_seconds_total.
func TestSamplerOfReadsCPUWhereIstiodRuns(t *testing.T) {
	onHost := SamplerOf(cluster.IstiodEndpoints{Name: "c1/istiod", PID: os.Getpid})
	assert.Equal(t, measure.SchedstatName, onHost.CPUSource().Name())
	cpu, err := onHost.CPUSource().CPUSeconds(context.Background())
	require.NoError(t, err)
	assert.Positive(t, cpu, "this test process's own counters")

	_, fromMetric := SamplerOf(cluster.IstiodEndpoints{MetricsURL: "http://127.0.0.1:1/metrics"}).CPUSource().(measure.MetricCPU)
	assert.True(t, fromMetric)
}
