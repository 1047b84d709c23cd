package multicluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/suites/multicluster/options"
)

var _ = planned.Add("TestDataPlaneSecurity", func(in options.PlanIn) (plan.Item, bool) {
	return plan.Item{Expected: options.S(1), Detail: "identities at every hop (on the probes the data-plane tests share)"}, in.DataPlaneRuns
})

// TestDataPlaneSecurity checks the identities every hop enforces, and that nothing listens
// outside loopback.
func TestDataPlaneSecurity(t *testing.T) {
	ctx, cancel := context.WithTimeout(mc.Context(t), time.Minute)
	defer cancel()
	p := dataPlane(t, ctx)
	ha, ok := p.ProbeEnv.(cluster.HopAccess)
	if !ok {
		t.Skipf("provider %s does not let the test process dial the data plane's hops", mc.Provider.Name())
	}
	hops := ha.Hops()
	if !hops.RemoteGateway.IsValid() {
		t.Run("nothing listens outside loopback", func(t *testing.T) { nothingListensOffLoopback(t) })
		t.Skip("no cluster on another network: no east-west gateway on the probe path to check")
	}
	ztunnelAddr, gatewayAddr := hops.RemoteZtunnel.String(), hops.RemoteGateway.String()
	echoAuthority, remoteHost := hops.EchoAuthority, hops.RemoteHost

	clientCA, err := mesh.IntermediateOf(mc.observed().Name, hops.ClientCA)
	require.NoError(t, err)
	legit, err := clientCA.Issue(hops.ProbeNamespace, "client", 0)
	require.NoError(t, err)
	roots := hops.Roots

	t.Run("foreign root refused by ztunnel and gateway", func(t *testing.T) {
		foreignRoot, err := pki.NewRoot()
		require.NoError(t, err)
		inter, err := foreignRoot.NewIntermediate("intruder")
		require.NoError(t, err)
		intruder, err := inter.Issue(hops.ProbeNamespace, "client", 0)
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
		expected := hops.EchoID
		_, err := c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, expected)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), hops.GatewayID, "names the identity it saw")
		assert.Contains(t, err.Error(), expected, "and the one it wanted")
	})

	t.Run("unknown service gets a clear refusal", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		_, err := c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: "nope.probe.svc.cluster.local:80",
			TLS: pki.ClientConfig(legit, roots, hops.GatewayID)})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "503")
		assert.Contains(t, err.Error(), "no service nope.probe.svc.cluster.local")
	})

	t.Run("the legitimate path still works", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		conn, err := c.DialDouble(ctx,
			hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, hops.GatewayID)},
			hbone.Target{Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, hops.EchoID)})
		require.NoError(t, err, "the same client, with the right expectations, gets through")
		conn.Close()
	})

	t.Run("nothing listens outside loopback", func(t *testing.T) { nothingListensOffLoopback(t) })
}

// nothingListensOffLoopback checks every listening socket of the run's processes.
func nothingListensOffLoopback(t *testing.T) {
	l, ok := mc.Provider.(cluster.Listeners)
	if !ok {
		t.Skipf("provider %s does not run its processes on this host", mc.Provider.Name())
	}
	addrs, err := l.Listening()
	require.NoError(t, err)
	require.NotEmpty(t, addrs)
	for _, a := range addrs {
		assert.True(t, a.Addr().IsLoopback(), "%s listens on a non-loopback address", a)
	}
	t.Logf("%d listening sockets, all on loopback", len(addrs))
}
