package local

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/probeapp"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// The API server's pod proxy reaches pods only through the framework's egress proxy and its
// address mapping. Pod addresses are API data: a direct dial of one would leave the machine, so
// the test first proves the path with a pod on an address that never leaves it (this host's own,
// which the kernel delivers over loopback and the mapping refuses); only then does it proxy to a
// pod address of the plan.
func TestAPIServerPodProxyGoesThroughTheMapping(t *testing.T) {
	host, ok := localNonLoopback()
	if !ok {
		t.Skip("no non-loopback address on this host to prove the egress path with")
	}
	p := cachedProvider(t)
	ctx := context.Background()
	cs := startClusters(t, ctx, p, 1)
	c, egress := cs[0], p.egress[0]

	const ns = "proxy-check"
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the serviceaccount controller creates default")
	pod := func(name string, ip netip.Addr) {
		t.Helper()
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, workload.NewPod(ns, name, name, "default", "node-0"), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, workload.PatchPodStatus(ctx, c, created, workload.RunningStatus(ip, netip.MustParseAddr("127.0.0.1"), true)))
	}
	get := func(name string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return c.Client.CoreV1().Pods(ns).ProxyGet("http", name, "8080", "echo", map[string]string{"size": "16"}).DoRaw(ctx)
	}

	// 1. This host's own address: the mapping refuses it. Without the egress selector the API
	// server would dial it itself (and find nothing listening), and the proxy would count nothing.
	pod("guard", host)
	_, err = get("guard")
	require.Error(t, err, "a pod on %s must not be reachable", host)
	require.Equal(t, int64(1), egress.Refused.Load(), "the API server sent the pod proxy's dial of %s to the egress proxy, which refused it: %v", host, err)
	require.Zero(t, egress.Connected.Load())

	// 2. A pod address of the plan reaches the echo server on its loopback twin.
	ip, err := c.Addresses.Plan.PodIP(200)
	require.NoError(t, err)
	echo, err := probeapp.ServeEcho(ip, c.Name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = echo.Close() })
	pod("echo", ip)
	body, err := get("echo")
	require.NoError(t, err, "pod proxy to %s", ip)
	assert.Len(t, body, 16, "fortio's echo answered with the payload asked for")
	assert.Equal(t, int64(1), egress.Connected.Load(), "carried by the egress proxy")
	assert.Equal(t, int64(1), echo.Requests.Load(), "served on %s's loopback twin", ip)
}

// localNonLoopback is an IPv4 address of one of this host's interfaces other than lo: a dial of it
// stays on the host.
func localNonLoopback() (netip.Addr, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() && ip.Unmap().IsGlobalUnicast() && !ip.IsLoopback() {
				return ip.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}
