package multicluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/proc"
)

var _ = planned.Add("TestDataPlaneSecurity", experiment.DataPlaneNeeds, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(1), Detail: "identities at every hop (on the probes the data-plane tests share)"}
})

// TestDataPlaneSecurity checks the identities every hop enforces, and that nothing listens
// outside loopback.
func TestDataPlaneSecurity(t *testing.T) {
	ctx, cancel := context.WithTimeout(mc.Begin(t), time.Minute)
	defer cancel()
	p := mc.DataPlane(t, ctx)
	ha, ok := p.Env.(probe.HopAccess)
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

	clientCA, err := mesh.IntermediateOf(mc.ObservedCluster().Name, hops.ClientCA)
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
		before := p.Counters(t, ctx)
		_, err = c.Dial(ctx, hbone.Target{Addr: ztunnelAddr, Authority: echoAuthority, TLS: pki.ClientConfig(intruder, roots), PoolKey: "intruder-z"})
		refusedBeforeCONNECT(t, err, "ztunnel must refuse a certificate from another root")
		_, err = c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(intruder, roots), PoolKey: "intruder-g"})
		refusedBeforeCONNECT(t, err, "the gateway must refuse a certificate from another root")
		nothingReachedPast(t, ctx, p, before)
	})

	t.Run("client refuses a gateway with the wrong identity", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		expected := hops.EchoID
		before := p.Counters(t, ctx)
		_, err := c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, expected)})
		// The refusal is this test's own client's (framework/pki), so its words are the behaviour.
		require.Error(t, err)
		assert.Contains(t, err.Error(), hops.GatewayID, "names the identity it saw")
		assert.Contains(t, err.Error(), expected, "and the one it wanted")
		nothingReachedPast(t, ctx, p, before)
	})

	t.Run("unknown service is refused", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		before := p.Counters(t, ctx)
		_, err := c.Dial(ctx, hbone.Target{Addr: gatewayAddr, Authority: "nope.probe.svc.cluster.local:80",
			TLS: pki.ClientConfig(legit, roots, hops.GatewayID)})
		// The gateway took the client's identity and refused the tunnel: a CONNECT answered with an
		// error status, as the emulator and Envoy (no route: 404) answer, or a reset stream.
		require.Error(t, err)
		var refused *hbone.RefusedError
		var reset http2.StreamError
		switch {
		case errors.As(err, &refused):
			assert.GreaterOrEqual(t, refused.StatusCode, 400, "a refusal, not a tunnel: %v", err)
		case errors.As(err, &reset):
		default:
			t.Errorf("the gateway must refuse the CONNECT itself (an error status or a reset stream), after the handshake: %v", err)
		}
		nothingReachedPast(t, ctx, p, before)
	})

	t.Run("the legitimate path still works", func(t *testing.T) {
		c := hbone.NewClient()
		defer c.Close()
		before := p.Counters(t, ctx)
		conn, err := c.DialDouble(ctx,
			hbone.Target{Addr: gatewayAddr, Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, hops.GatewayID)},
			hbone.Target{Authority: remoteHost, TLS: pki.ClientConfig(legit, roots, hops.EchoID)})
		require.NoError(t, err, "the same client, with the right expectations, gets through")
		conn.Close()
		// The counters the refusals above left as they were see this tunnel.
		assert.Greater(t, total(p.Counters(t, ctx).Inbound), total(before.Inbound), "the destination ztunnel accepted the legitimate tunnel")
	})

	t.Run("nothing listens outside loopback", func(t *testing.T) { nothingListensOffLoopback(t) })
}

// nothingReachedPast checks that a refused dial carried nothing beyond the hops that refused it:
// no destination ztunnel accepted a connection, no app served a request. (A gateway's own
// counter may count the CONNECT it refused, as Envoy's downstream_rq does on kind.)
func nothingReachedPast(t *testing.T, ctx context.Context, p *experiment.Probes, before probe.PathCounters) {
	t.Helper()
	after := p.Counters(t, ctx)
	assert.Equal(t, before.Inbound, after.Inbound, "connections the destination ztunnels accepted")
	assert.Equal(t, before.Served, after.Served, "requests the apps served")
}

// total sums a counter over clusters.
func total(byCluster map[string]int64) int64 {
	var n int64
	for _, v := range byCluster {
		n += v
	}
	return n
}

// refusedBeforeCONNECT checks that a dial failed at the handshake (the hop refused the client's
// certificate), not with an answer to a CONNECT: however the hop says it (an alert, a reset).
func refusedBeforeCONNECT(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	var refused *hbone.RefusedError
	assert.False(t, errors.As(err, &refused), "%s: refused at the handshake, before any CONNECT was answered: %v", msg, err)
}

// nothingListensOffLoopback checks every listening socket of the run's processes.
func nothingListensOffLoopback(t *testing.T) {
	if !mc.Provider.Facts().OnLoopback {
		t.Skipf("provider %s does not run its processes on this host", mc.Provider.Name())
	}
	addrs, err := proc.RunListening()
	require.NoError(t, err)
	require.NotEmpty(t, addrs)
	for _, a := range addrs {
		assert.True(t, a.Addr().IsLoopback(), "%s listens on a non-loopback address", a)
	}
	t.Logf("%d listening sockets, all on loopback", len(addrs))
}
