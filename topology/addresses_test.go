package topology

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var loopbackNet = netip.MustParsePrefix("127.0.0.0/8")

func TestAddressPlanValues(t *testing.T) {
	pod, err := PodCIDR(1)
	require.NoError(t, err)
	assert.Equal(t, "127.11.0.0/16", pod.String())
	svc, err := ServiceCIDR(1)
	require.NoError(t, err)
	assert.Equal(t, "127.101.0.0/16", svc.String())
	gw, err := GatewayIP(1)
	require.NoError(t, err)
	assert.Equal(t, "127.201.0.1", gw.String())

	pod, _ = PodCIDR(50)
	assert.Equal(t, "127.60.0.0/16", pod.String())
	svc, _ = ServiceCIDR(50)
	assert.Equal(t, "127.150.0.0/16", svc.String())
	gw, _ = GatewayIP(50)
	assert.Equal(t, "127.250.0.1", gw.String())
}

func TestPodIP(t *testing.T) {
	for _, tc := range []struct {
		i, n int
		want string
	}{
		{1, 0, "127.11.0.1"},
		{1, 253, "127.11.0.254"},
		{1, 254, "127.11.1.1"}, // skips .255 and .0
		{3, 1000, "127.13.3.239"},
		{1, MaxPods - 1, "127.11.254.254"}, // last pod, below the node /24
	} {
		got, err := PodIP(tc.i, tc.n)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got.String(), "PodIP(%d, %d)", tc.i, tc.n)
	}
	assert.Equal(t, 64770, MaxPods)

	_, err := PodIP(1, MaxPods)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "64770 pods fit per cluster")
	_, err = PodIP(1, -1)
	assert.Error(t, err)
}

func TestNodeIP(t *testing.T) {
	got, err := NodeIP(2, 0)
	require.NoError(t, err)
	assert.Equal(t, "127.12.255.1", got.String())
	got, err = NodeIP(2, MaxNodes-1)
	require.NoError(t, err)
	assert.Equal(t, "127.12.255.254", got.String())

	_, err = NodeIP(2, MaxNodes)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "254 nodes fit per cluster")
	_, err = NodeIP(2, -1)
	assert.Error(t, err)
}

func TestAddressPlanIndexBounds(t *testing.T) {
	for _, i := range []int{-1, 0, MaxClusters + 1} {
		_, err := PodCIDR(i)
		assert.ErrorContains(t, err, "out of range 1..50", "PodCIDR(%d)", i)
		_, err = ServiceCIDR(i)
		assert.ErrorContains(t, err, "out of range 1..50", "ServiceCIDR(%d)", i)
		_, err = GatewayIP(i)
		assert.ErrorContains(t, err, "out of range 1..50", "GatewayIP(%d)", i)
		_, err = PodIP(i, 0)
		assert.ErrorContains(t, err, "out of range 1..50", "PodIP(%d, 0)", i)
		_, err = NodeIP(i, 0)
		assert.ErrorContains(t, err, "out of range 1..50", "NodeIP(%d, 0)", i)
	}
}

// No range of one cluster may overlap any range of another (or another range of its own),
// and everything stays in 127.0.0.0/8.
func TestAddressPlanNoOverlap(t *testing.T) {
	type named struct {
		name   string
		prefix netip.Prefix
	}
	var all []named
	for i := 1; i <= MaxClusters; i++ {
		pod, err := PodCIDR(i)
		require.NoError(t, err)
		svc, err := ServiceCIDR(i)
		require.NoError(t, err)
		gw, err := GatewayIP(i)
		require.NoError(t, err)
		all = append(all,
			named{"pod", pod},
			named{"service", svc},
			named{"gateway", netip.PrefixFrom(gw, 32)},
		)

		// Pod and node addresses at the edges stay in the cluster's pod range.
		for _, a := range []func() (netip.Addr, error){
			func() (netip.Addr, error) { return PodIP(i, 0) },
			func() (netip.Addr, error) { return PodIP(i, MaxPods-1) },
			func() (netip.Addr, error) { return NodeIP(i, 0) },
			func() (netip.Addr, error) { return NodeIP(i, MaxNodes-1) },
		} {
			addr, err := a()
			require.NoError(t, err)
			assert.True(t, pod.Contains(addr), "%s outside %s", addr, pod)
		}
	}
	for a := range all {
		assert.True(t, loopbackNet.Contains(all[a].prefix.Addr()) && all[a].prefix.Bits() >= 8,
			"%s %s outside 127.0.0.0/8", all[a].name, all[a].prefix)
		for b := a + 1; b < len(all); b++ {
			assert.False(t, all[a].prefix.Overlaps(all[b].prefix),
				"%s %s overlaps %s %s", all[a].name, all[a].prefix, all[b].name, all[b].prefix)
		}
	}
	assert.Len(t, all, 3*MaxClusters)
}

// Pods never take a .0 or .255 host part, and never the node /24.
func TestPodIPSkipsReserved(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for n := range MaxPods {
		addr, err := PodIP(7, n)
		require.NoError(t, err)
		b := addr.As4()
		if b[3] == 0 || b[3] == 255 || b[2] == 255 || seen[addr] {
			t.Fatalf("PodIP(7, %d) = %s: reserved or repeated", n, addr)
		}
		seen[addr] = true
	}
	assert.Len(t, seen, MaxPods)
}
