package multicluster

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/experiment/options"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/probeapp"
)

var _ = planned.Add("TestAuthorizationAcrossClusters", options.DataPlaneNeeds, func(in options.PlanIn) plan.Item {
	return plan.Item{Expected: options.S(4), Detail: "an ALLOW for one caller of another cluster, across networks: applied, then removed"}
})

// policyWait bounds how long istiod takes to bring a policy change to the destination's ztunnel.
const policyWait = 30 * time.Second

// TestAuthorizationAcrossClusters checks ztunnel's L4 authorization across clusters and networks
// (its file sorts after the measuring suites: run first, it would leave the probe clusters joined,
// and TestChurn would restart its istiod fresh):
// an AuthorizationPolicy on echo-remote (in the cluster on the other network) that allows the
// client's service account of the observed cluster lets its double-HBONE tunnel through the east-
// west gateway reach the app, and refuses a second service account of that cluster at the
// destination, by SPIFFE identity. Before the policy both reach it; once it is gone, both again.
func TestAuthorizationAcrossClusters(t *testing.T) {
	ctx := mc.Begin(t)
	p := mc.DataPlane(t, ctx)
	ha, ok := p.ProbeEnv.(cluster.HopAccess)
	if !ok {
		t.Skipf("provider %s does not let the test process dial the data plane's hops", mc.Provider.Name())
	}
	hops := ha.Hops()
	if !hops.RemoteGateway.IsValid() || p.Remote == nil {
		t.Skip("no cluster on another network: no cross-network path to authorize")
	}
	clientCA, err := mesh.IntermediateOf(mc.ObservedCluster().Name, hops.ClientCA)
	require.NoError(t, err)
	reach := func(sa string) error {
		cert, err := clientCA.Issue(hops.ProbeNamespace, sa, 0)
		require.NoError(t, err)
		return reachEchoRemote(ctx, hops, cert)
	}
	require.NoError(t, reach("client"), "no policy: the client reaches echo-remote")
	require.NoError(t, reach("intruder"), "no policy: any caller under the mesh root does")

	remove, err := mesh.ApplyPolicy(ctx, p.Remote, mesh.Policy{Namespace: hops.ProbeNamespace, Name: "allow-client", App: cluster.EchoRemote,
		Action: "ALLOW", Principals: []string{pki.TrustDomain + "/ns/" + hops.ProbeNamespace + "/sa/client"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, remove(context.Background()))
		require.Eventually(t, func() bool { return reach("intruder") == nil }, policyWait, 200*time.Millisecond,
			"the policy's removal reaches echo-remote's ztunnel")
	})
	var denied error
	require.Eventually(t, func() bool { denied = reach("intruder"); return denied != nil }, policyWait, 200*time.Millisecond,
		"the ALLOW for the client reaches echo-remote's ztunnel and refuses another caller")
	var refused *hbone.RefusedError
	if assert.ErrorAs(t, denied, &refused, "refused at the destination's CONNECT, after the gateway let the tunnel through") {
		assert.Equal(t, http.StatusUnauthorized, refused.StatusCode, "%v", denied)
	}
	assert.NoError(t, reach("client"), "the caller the policy allows, from the other cluster and network")
}

// reachEchoRemote opens a double-HBONE tunnel as cert through the remote east-west gateway to
// echo-remote and gets one answer from its app through it.
func reachEchoRemote(ctx context.Context, hops cluster.Hops, cert *pki.Cert) error {
	c := hbone.NewClient()
	defer c.Close()
	conn, err := c.DialDouble(ctx,
		hbone.Target{Addr: hops.RemoteGateway.String(), Authority: hops.RemoteHost, TLS: pki.ClientConfig(cert, hops.Roots, hops.GatewayID)},
		hbone.Target{Authority: hops.RemoteHost, TLS: pki.ClientConfig(cert, hops.Roots, hops.EchoID)})
	if err != nil {
		return err
	}
	defer conn.Close()
	host, _, _ := net.SplitHostPort(hops.RemoteHost)
	return probeapp.FetchOver(conn, host)
}
