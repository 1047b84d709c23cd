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
	assert.Equal(t, "10.11.0.0/16", pod.String())
	svc, err := ServiceCIDR(1)
	require.NoError(t, err)
	assert.Equal(t, "127.101.0.0/16", svc.String())
	gw, err := GatewayIP(1)
	require.NoError(t, err)
	assert.Equal(t, "127.201.0.1", gw.String())

	pod, _ = PodCIDR(50)
	assert.Equal(t, "10.60.0.0/16", pod.String())
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
		{1, 0, "10.11.0.1"},
		{1, 253, "10.11.0.254"},
		{1, 254, "10.11.1.1"}, // skips .255 and .0
		{3, 1000, "10.13.3.239"},
		{1, MaxPods - 1, "10.11.254.254"}, // last pod, below the node /24
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
		assert.ErrorContains(t, err, "out of range 1..100", "PodCIDR(%d)", i)
		_, err = ServiceCIDR(i)
		assert.ErrorContains(t, err, "out of range 1..100", "ServiceCIDR(%d)", i)
		_, err = GatewayIP(i)
		assert.ErrorContains(t, err, "out of range 1..100", "GatewayIP(%d)", i)
		_, err = PodIP(i, 0)
		assert.ErrorContains(t, err, "out of range 1..100", "PodIP(%d, 0)", i)
		_, err = NodeIP(i, 0)
		assert.ErrorContains(t, err, "out of range 1..100", "NodeIP(%d, 0)", i)
	}
}

// No range of one cluster may overlap any range of another (or another range of its own); pods
// are in 10.0.0.0/8 (API data), everything else and every pod's socket in 127.0.0.0/8.
func TestAddressPlanNoOverlap(t *testing.T) {
	type named struct {
		name   string
		prefix netip.Prefix
	}
	tenNet := netip.MustParsePrefix("10.0.0.0/8")
	var all []named
	for i := 1; i <= MaxClusters; i++ {
		pod, err := PodCIDR(i)
		require.NoError(t, err)
		nodes, err := NodeCIDR(i)
		require.NoError(t, err)
		svc, err := ServiceCIDR(i)
		require.NoError(t, err)
		gw, err := GatewayIP(i)
		require.NoError(t, err)
		assert.True(t, tenNet.Contains(pod.Addr()), "pod range %s outside 10.0.0.0/8", pod)
		all = append(all,
			named{"node", nodes},
			named{"service", svc},
			named{"gateway", netip.PrefixFrom(gw, 32)},
		)

		// Pod addresses at the edges stay in the pod range, and their sockets in the loopback
		// twin of it, outside the node /24; node addresses stay in the node range.
		sockets := netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(twinOctet(i)), 0, 0}), 16)
		for _, n := range []int{0, MaxPods - 1} {
			addr, err := PodIP(i, n)
			require.NoError(t, err)
			assert.True(t, pod.Contains(addr), "%s outside %s", addr, pod)
			sock, ok := LoopbackOf(addr)
			require.True(t, ok, "LoopbackOf(%s)", addr)
			assert.True(t, sockets.Contains(sock) && !nodes.Contains(sock), "socket %s of %s", sock, addr)
		}
		for _, k := range []int{0, MaxNodes - 1} {
			addr, err := NodeIP(i, k)
			require.NoError(t, err)
			assert.True(t, nodes.Contains(addr), "%s outside %s", addr, nodes)
		}
		all = append(all, named{"pod sockets", sockets})
	}
	for a := range all {
		p := all[a].prefix
		assert.True(t, loopbackNet.Contains(p.Addr()) && p.Bits() >= 8, "%s %s outside 127.0.0.0/8", all[a].name, p)
		for b := a + 1; b < len(all); b++ {
			// A cluster's node /24 is inside its pod sockets' /16 by design; LoopbackOf never
			// maps a pod onto it (checked above and in TestLoopbackOf).
			if all[a].name == "node" && all[b].name == "pod sockets" && b == a+3 {
				continue
			}
			assert.False(t, p.Overlaps(all[b].prefix), "%s %s overlaps %s %s", all[a].name, p, all[b].name, all[b].prefix)
		}
	}
	assert.Len(t, all, 4*MaxClusters)
}

func TestLoopbackOf(t *testing.T) {
	for _, tc := range []struct {
		pod, want string
	}{
		{"10.11.0.1", "127.11.0.1"},
		{"10.60.254.254", "127.60.254.254"},
		{"10.13.3.239", "127.13.3.239"},
		{"10.61.0.1", "127.61.0.1"},
		{"10.100.4.5", "127.100.4.5"},
		{"10.101.0.1", "127.1.0.1"},
		{"10.110.254.254", "127.10.254.254"},
	} {
		got, ok := LoopbackOf(netip.MustParseAddr(tc.pod))
		require.True(t, ok, tc.pod)
		assert.Equal(t, tc.want, got.String())
	}
	// Neither in the plan nor its node /24, nor loopback, nor IPv6: no mapping (the data plane
	// then refuses, it never dials these).
	for _, a := range []string{"10.10.0.1", "10.111.0.1", "10.101.255.1", "10.11.255.1", "10.244.0.5", "192.168.1.1", "127.11.0.1", "::1", "fd00::1"} {
		_, ok := LoopbackOf(netip.MustParseAddr(a))
		assert.False(t, ok, a)
	}
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
