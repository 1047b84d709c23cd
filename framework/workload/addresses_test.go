package workload_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	. "github.com/ambientmc/ambientmc/framework/workload"
)

// Where node IPAM places pods (kind, kube), a fake node takes the first address of its podCIDR
// and its pods the following ones, never an address outside it or a loopback one.
func TestAddressesFromNodePodCIDRs(t *testing.T) {
	c := &cluster.Cluster{Addresses: cluster.Addresses{Pods: netip.MustParsePrefix("10.11.0.0/16")}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-3"}, Spec: corev1.NodeSpec{PodCIDR: "10.11.4.0/24"}}
	ip, err := NodeIP(c, n, 3)
	require.NoError(t, err)
	assert.Equal(t, "10.11.4.1", ip.String())
	for j, want := range map[int]string{0: "10.11.4.2", 1: "10.11.4.3", 252: "10.11.4.254"} {
		ip, err := PodIP(c, n, 3, j, 15)
		require.NoError(t, err)
		assert.Equal(t, want, ip.String(), "pod %d", j)
	}
	_, err = PodIP(c, n, 3, 253, 15)
	assert.ErrorContains(t, err, "10.11.4.0/24 has 254 host addresses", "the broadcast address is no pod's")
	assert.ErrorContains(t, err, "--node-cidr-mask-size")

	_, err = NodeIP(c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}}, 0)
	assert.ErrorContains(t, err, "node node-0 has no spec.podCIDR")
	_, err = PodIP(c, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: corev1.NodeSpec{PodCIDR: "fd00::/64"}}, 0, 0, 1)
	assert.ErrorContains(t, err, "IPv4")
}
