package topology

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGenerate(t *testing.T) {
	topo, err := Generate(3)
	require.NoError(t, err)
	assert.Equal(t, SourceGenerated, topo.Source)
	require.Len(t, topo.Clusters, 3)
	for i, c := range topo.Clusters {
		n := i + 1
		assert.Equal(t, Cluster{
			Name:    "cluster-" + strconv.Itoa(n),
			Network: "network-" + strconv.Itoa(n),
			Primary: "cluster-" + strconv.Itoa(n),
			Config:  "cluster-" + strconv.Itoa(n),
			Index:   n,
		}, c)
		assert.True(t, c.IsPrimary())
		assert.False(t, c.IsRemote())
	}
	assert.Equal(t, []string{"network-1", "network-2", "network-3"}, topo.Networks())
	assert.Len(t, topo.Primaries(), 3)
	assert.False(t, topo.HasKubeconfigs())
	require.NoError(t, topo.Validate())
}

func TestGenerateMax(t *testing.T) {
	topo, err := Generate(MaxClusters)
	require.NoError(t, err)
	assert.Len(t, topo.Clusters, MaxClusters)
	assert.NoError(t, topo.Validate())
	assert.NoError(t, topo.Check(local))
}

func TestGenerateBounds(t *testing.T) {
	for _, n := range []int{-1, 0} {
		_, err := Generate(n)
		require.Error(t, err, "n=%d", n)
		assert.Contains(t, err.Error(), "-clusters", "n=%d", n)
		assert.Contains(t, err.Error(), "at least 1", "n=%d", n)
		var te *Error
		assert.ErrorAs(t, err, &te)
	}
	// The cap is the provider's: 101 clusters generate, and the local provider refuses them.
	topo, err := Generate(MaxClusters + 1)
	require.NoError(t, err)
	err = topo.Check(local)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most 100 clusters with -provider=local")
}

func TestGetPrimariesNetworks(t *testing.T) {
	topo, err := Parse([]byte(`
clusters:
- name: a
  network: west
  kubeconfig: /k/a
- name: b
  network: west
  primary: a
  kubeconfig: /k/b
- name: c
  kubeconfig: /k/c
`), "t.yaml")
	require.NoError(t, err)

	b, ok := topo.Get("b")
	require.True(t, ok)
	assert.True(t, b.IsRemote())
	assert.Equal(t, "a", b.Primary)
	assert.Equal(t, "a", b.Config, "config defaults to the primary")
	assert.Equal(t, 2, b.Index)

	_, ok = topo.Get("nope")
	assert.False(t, ok)

	var primaries []string
	for _, p := range topo.Primaries() {
		primaries = append(primaries, p.Name)
	}
	assert.Equal(t, []string{"a", "c"}, primaries)
	assert.Equal(t, []string{"west", "network-3"}, topo.Networks())
	assert.True(t, topo.HasKubeconfigs())
}

func TestHasKubeconfigsNeedsAll(t *testing.T) {
	topo, err := Parse([]byte(`{"clusters":[{"name":"a","kubeconfig":"/k"},{"name":"b"}]}`), "t.json")
	require.NoError(t, err)
	assert.False(t, topo.HasKubeconfigs())
	assert.False(t, (&Topology{}).HasKubeconfigs())
}

func TestHandBuiltClusterDefaults(t *testing.T) {
	c := Cluster{Name: "x", Index: 1}
	assert.True(t, c.IsPrimary(), "empty Primary means a primary")
	topo := &Topology{Clusters: []Cluster{c, {Name: "y", Primary: "x", Index: 2}}}
	assert.NoError(t, topo.Validate())
	assert.Equal(t, []string{"network-1", "network-2"}, topo.Networks())
}

func TestGenerateNetworksRoundRobin(t *testing.T) {
	topo, err := GenerateNetworks(5, 2)
	require.NoError(t, err)
	var nets []string
	for _, c := range topo.Clusters {
		nets = append(nets, c.Network)
	}
	assert.Equal(t, []string{"network-1", "network-2", "network-1", "network-2", "network-1"}, nets)
	c := topo.Clusters
	assert.Equal(t, SameCluster, RelationOf(c[0], c[0]))
	assert.Equal(t, SameNetwork, RelationOf(c[0], c[2]))
	assert.Equal(t, OtherNetwork, RelationOf(c[0], c[1]))
	one, err := GenerateNetworks(3, 1)
	require.NoError(t, err)
	assert.Len(t, one.Networks(), 1, "-networks=1 is a single network")
	for _, k := range []int{0, 4} {
		_, err := GenerateNetworks(3, k)
		require.Error(t, err, "-networks=%d for 3 clusters", k)
		assert.Contains(t, err.Error(), "-networks")
	}
}
