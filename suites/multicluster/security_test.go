package multicluster

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/dataplane"
	"github.com/ambientmc/ambientmc/framework/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// TestDataPlaneSecurity checks the identities every hop enforces, and that nothing listens
// outside loopback.
func TestDataPlaneSecurity(t *testing.T) {
	p := dataPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	echo, ok := p.probes.Server(workload.EchoRemote, p.remote.Name)
	require.True(t, ok)
	gw, err := topology.GatewayIP(p.remote.Index)
	require.NoError(t, err)
	ztunnelAddr := netip.AddrPortFrom(echo.IP, dataplane.HBONEPort).String()
	gatewayAddr := netip.AddrPortFrom(gw, dataplane.HBONEPort).String()
	echoAuthority := net.JoinHostPort(echo.IP.String(), strconv.Itoa(workload.EchoPort))
	remoteHost := net.JoinHostPort(workload.EchoRemote+"."+workload.ProbeNamespace+".svc.cluster.local", strconv.Itoa(workload.ProbePort))

	legit, err := ambient.Intermediates[p.local.Name].Issue(workload.ProbeNamespace, "client", 0)
	require.NoError(t, err)
	roots := ambient.Root.Pool()

	t.Run("foreign root refused by ztunnel and gateway", func(t *testing.T) {
		foreignRoot, err := pki.NewRoot()
		require.NoError(t, err)
		inter, err := foreignRoot.NewIntermediate("intruder")
		require.NoError(t, err)
		intruder, err := inter.Issue(workload.ProbeNamespace, "client", 0)
		require.NoError(t, err)
		c := hbone.NewClient()
		defer c.Close()
		_, err = c.Dial(ctx, hbone.Target{Addr: ztunnelAddr, Authority: echoAuthority, TLS: pki.ClientConfig(intruder, roots), PoolKey: "intruder-z"})
		require.Error(t, err, "ztunnel must refuse a certificate from another root")
		assert.Contains(t, err.Error(), "certificate")
		_, err = c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(intruder, roots), PoolKey: "intruder-g"})
		require.Error(t, err, "the gateway must refuse a certificate from another root")
		assert.Contains(t, err.Error(), "certificate")
	})

	t.Run("client refuses a gateway with the wrong identity", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		expected := pki.SPIFFEID(workload.ProbeNamespace, "echo")
		_, err := c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, expected)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), dataplane.GatewayIdentity, "names the identity it saw")
		assert.Contains(t, err.Error(), expected, "and the one it wanted")
	})

	t.Run("unknown service gets a clear refusal", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		_, err := c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: "nope.probe.svc.cluster.local:80",
			TLS: pki.ClientConfig(legit, roots, dataplane.GatewayIdentity)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "503")
		assert.Contains(t, err.Error(), "no service nope.probe.svc.cluster.local")
	})

	t.Run("the legitimate path still works", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		conn, err := c.DialDouble(ctx,
			hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, dataplane.GatewayIdentity)},
			hbone.Target{Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, pki.SPIFFEID(workload.ProbeNamespace, "echo"))})
		require.NoError(t, err, "the same client, with the right expectations, gets through")
		conn.Close()
	})

	t.Run("nothing listens outside loopback", func(t *testing.T) {
		pids := []int{os.Getpid()}
		for _, pr := range proc.Running() {
			pids = append(pids, pr.Pid())
		}
		addrs, err := proc.Listening(pids...)
		require.NoError(t, err)
		require.NotEmpty(t, addrs)
		for _, a := range addrs {
			assert.True(t, a.Addr().IsLoopback(), "%s listens on a non-loopback address", a)
		}
		t.Logf("%d listening sockets of %d processes, all on loopback", len(addrs), len(pids))
	})
}
