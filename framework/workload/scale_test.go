package workload

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

func TestProfiles(t *testing.T) {
	for name, s := range Profiles {
		assert.Equal(t, name, s.Name, "a profile carries its own name")
		got, err := Resolve(name, 0, 0)
		require.NoError(t, err, name)
		assert.Equal(t, s, got, "no overrides: the profile as is")
	}
	// The design's published load is fixed: reports compare against Istio's numbers.
	assert.Equal(t, Scale{Name: "published", Services: 300, Pods: 4000, Namespaces: 10, Nodes: 15}, Profiles["published"])
	assert.Equal(t, Scale{Name: "small", Services: 20, Pods: 100, Namespaces: 2, Nodes: 3}, Profiles["small"])
	assert.Equal(t, Scale{Name: "medium", Services: 100, Pods: 1000, Namespaces: 5, Nodes: 8}, Profiles["medium"])
}

func TestResolveOverrides(t *testing.T) {
	s, err := Resolve("small", 50, 500)
	require.NoError(t, err)
	assert.Equal(t, Scale{Name: CustomName, Services: 50, Pods: 500, Namespaces: 2, Nodes: 3}, s)

	s, err = Resolve("published", 0, 6000)
	require.NoError(t, err)
	assert.Equal(t, Scale{Name: CustomName, Services: 300, Pods: 6000, Namespaces: 10, Nodes: 15}, s)

	// Overriding with the profile's own value is no change.
	s, err = Resolve("medium", 100, 1000)
	require.NoError(t, err)
	assert.Equal(t, "medium", s.Name)

	// Fewer services than namespaces: no empty namespaces.
	s, err = Resolve("published", 3, 3)
	require.NoError(t, err)
	assert.Equal(t, Scale{Name: CustomName, Services: 3, Pods: 3, Namespaces: 3, Nodes: 15}, s)

	s, err = Resolve("small", 0, MaxScalePods)
	require.NoError(t, err)
	assert.Equal(t, MaxScalePods, s.Pods, "the whole plan less the probe block fits")
}

func TestResolveErrors(t *testing.T) {
	for _, tc := range []struct {
		name, profile  string
		services, pods int
		want           string
	}{
		{"unknown profile", "huge", 0, 0, `-scale="huge": unknown profile; valid profiles: small, medium, published`},
		{"empty profile", "", 0, 0, `-scale="": unknown profile; valid profiles: small, medium, published`},
		{"negative services", "small", -3, 0, "-services=-3: must be positive; 0 takes the count from -scale=small (20)"},
		{"negative pods", "medium", 0, -1, "-pods=-1: must be positive; 0 takes the count from -scale=medium (1000)"},
		{"pods below services", "small", 0, 10, "-pods=10 is less than the 20 services: every service needs at least one pod, so -pods must be at least -services"},
		{"both set, pods below services", "small", 40, 30, "-pods=30 is less than the 40 services"},
		{"services above the profile's pods", "small", 200, 0, "-services=200 is more than the 100 pods of -scale=small: every service needs at least one pod; lower -services or raise -pods"},
		{"too many pods", "small", 0, topology.MaxPods, "-pods=64770: at most 64514 scale pods fit per cluster (64770 pod addresses, 256 reserved for probe workloads)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(tc.profile, tc.services, tc.pods)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestPlacement(t *testing.T) {
	s := Scale{Services: 4, Pods: 10, Namespaces: 3, Nodes: 2}
	var per []int
	total := 0
	for n := range s.Services {
		per = append(per, s.PodsOf(n))
		total += s.PodsOf(n)
	}
	assert.Equal(t, []int{3, 3, 2, 2}, per, "even share, the first services take the remainder")
	assert.Equal(t, s.Pods, total)
	assert.Equal(t, []string{"scale-0", "scale-1", "scale-2", "scale-0"},
		[]string{s.ServiceNamespace(0), s.ServiceNamespace(1), s.ServiceNamespace(2), s.ServiceNamespace(3)})
	assert.Equal(t, "node-3", NodeName(3))
	assert.Equal(t, "svc-12", ServiceName(12))
	assert.Equal(t, "x: 4 services, 10 pods, 3 namespaces, 2 nodes", Scale{Name: "x", Services: 4, Pods: 10, Namespaces: 3, Nodes: 2}.String())
}

// Bad scales and bad clusters fail before any request: the cluster here has no client at all.
func TestDeployRejectsBeforeTouchingTheCluster(t *testing.T) {
	c := &cluster.Cluster{Cluster: topology.Cluster{Name: "cluster-9", Index: 9}}
	good := Scale{Name: "t", Services: 2, Pods: 2, Namespaces: 1, Nodes: 1}
	for _, tc := range []struct {
		s    Scale
		want string
	}{
		{Scale{Name: "t", Services: 5, Pods: 2, Namespaces: 1, Nodes: 1}, "fewer pods than services"},
		{Scale{Name: "t", Services: 0, Pods: 2, Namespaces: 1, Nodes: 1}, "at least 1"},
		{Scale{Name: "t", Services: 2, Pods: 2, Namespaces: 0, Nodes: 1}, "at least 1"},
		{Scale{Name: "t", Services: 2, Pods: 2, Namespaces: 1, Nodes: 0}, "at least 1"},
		{Scale{Name: "t", Services: 2, Pods: 2, Namespaces: 1, Nodes: topology.MaxNodes + 1}, "at most 254 nodes"},
		{Scale{Name: "t", Services: 2, Pods: MaxScalePods + 1, Namespaces: 1, Nodes: 1}, "at most 64514 scale pods"},
	} {
		_, err := Deploy(context.Background(), c, tc.s, nil)
		require.Error(t, err, tc.s)
		assert.Contains(t, err.Error(), "cluster cluster-9: scale t:")
		assert.Contains(t, err.Error(), tc.want)
	}

	// A provider's plan without room for the pods fails before anything is created (the cluster
	// has no client: a request would panic).
	bad := &cluster.Cluster{Cluster: topology.Cluster{Name: "c0"}, Addresses: cluster.Addresses{Plan: noRoom{}}}
	_, err := Deploy(context.Background(), bad, good, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster c0: no room for pod")
}

type noRoom struct{}

func (noRoom) PodIP(n int) (netip.Addr, error) {
	return netip.Addr{}, fmt.Errorf("no room for pod %d", n)
}
func (noRoom) NodeIP(k int) (netip.Addr, error) {
	return netip.Addr{}, fmt.Errorf("no room for node %d", k)
}
