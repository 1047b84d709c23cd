package mesh

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// meshOf builds a mesh of primaries on fake clientsets (the bookkeeping under test needs no API
// server), with the remote secrets prepared.
func meshOf(names ...string) (*Mesh, map[string]*fake.Clientset) {
	m := &Mesh{secrets: map[string]*corev1.Secret{}}
	clients := map[string]*fake.Clientset{}
	for _, n := range names {
		cs := fake.NewClientset()
		clients[n] = cs
		m.Clusters = append(m.Clusters, &cluster.Cluster{Cluster: topology.Cluster{Name: n, Primary: n}, Client: cs})
		m.secrets[n] = SecretFor(n, []byte("kubeconfig of "+n))
	}
	return m, clients
}

// secretsIn lists the remote secrets in a cluster.
func secretsIn(t *testing.T, cs *fake.Clientset) []string {
	t.Helper()
	l, err := cs.CoreV1().Secrets(SystemNamespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Name)
	}
	return out
}

// joinAll joins names in order, each of which must succeed.
func joinAll(t *testing.T, m *Mesh, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, m.Join(context.Background(), n), "join %s", n)
	}
}

func failOn(cs *fake.Clientset, verb string) {
	cs.PrependReactor(verb, "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("injected API failure")
	})
}

func TestJoinExchangesSecrets(t *testing.T) {
	m, cs := meshOf("a", "b", "c")
	joinAll(t, m, "a", "b", "c")
	assert.Equal(t, []string{"a", "b", "c"}, m.Joined())
	assert.ElementsMatch(t, []string{RemoteSecretName("b"), RemoteSecretName("c")}, secretsIn(t, cs["a"]))
	assert.ElementsMatch(t, []string{RemoteSecretName("a"), RemoteSecretName("b")}, secretsIn(t, cs["c"]))
	require.Error(t, m.Join(context.Background(), "b"), "joining twice is refused")
}

func TestJoinFailingPartWayLeavesTheMeshAsItWas(t *testing.T) {
	m, cs := meshOf("a", "b", "c")
	joinAll(t, m, "a", "b")
	// c's secret lands in a, then b refuses it.
	failOn(cs["b"], "create")
	err := m.Join(context.Background(), "c")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injected API failure")
	assert.Contains(t, err.Error(), "were removed")
	assert.Equal(t, []string{"a", "b"}, m.Joined(), "c is not recorded as joined")
	assert.ElementsMatch(t, []string{RemoteSecretName("b")}, secretsIn(t, cs["a"]), "the secret written into a before the failure is gone")
	assert.Empty(t, secretsIn(t, cs["c"]), "c got no secret either")
}

func TestLeaveFailingPartWayKeepsTheClusterJoined(t *testing.T) {
	m, cs := meshOf("a", "b")
	ctx := context.Background()
	joinAll(t, m, "a", "b")
	failOn(cs["b"], "delete")
	err := m.Leave(ctx, "b")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stays in the mesh")
	assert.Equal(t, []string{"a", "b"}, m.Joined(), "nothing dropped before its secrets are gone")

	cs["b"].ReactionChain = cs["b"].ReactionChain[1:] // the API recovers
	require.NoError(t, m.Leave(ctx, "b"), "a failed leave can be retried")
	assert.Equal(t, []string{"a"}, m.Joined())
	assert.Empty(t, secretsIn(t, cs["a"]))
	assert.Empty(t, secretsIn(t, cs["b"]))
}

// TestRemoteSecretRefusesABrokenInternalKubeconfig: a current-context that names nothing, or a
// context naming no cluster, is one error naming the file, before anything is created (the
// cluster here has no clients at all, so any API call would panic).
func TestRemoteSecretRefusesABrokenInternalKubeconfig(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"no-context": "apiVersion: v1\nkind: Config\ncurrent-context: gone\nclusters: []\ncontexts: []\n",
		"no-cluster": "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: missing, user: u}\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
			c := &cluster.Cluster{Cluster: topology.Cluster{Name: "broken"}, InternalKubeconfig: path}
			_, err := RemoteSecret(context.Background(), c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), "cluster broken")
		})
	}
}
