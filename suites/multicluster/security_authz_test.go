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
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/probeapp"
	"github.com/ambientmc/ambientmc/framework/workload"
)

var _ = planned.Add("TestAuthorizationAcrossClusters", experiment.DataPlaneNeeds, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(6), Detail: "an ALLOW for one caller of another cluster, on the client's network and across networks: applied, then removed"}
})

// policyWait bounds how long istiod takes to bring a policy change to the destination's ztunnel.
const policyWait = 30 * time.Second

// TestAuthorizationAcrossClusters checks ztunnel's L4 authorization across clusters (its file
// sorts after the measuring suites: run first, it would leave the probe clusters joined, and
// TestChurn would restart its istiod fresh), on each path the topology has: to echo-peer in another
// cluster of the client's network (HBONE straight to its node's ztunnel) and to echo-remote on the
// other network (double HBONE through its east-west gateway). An AuthorizationPolicy on the
// destination that allows the observed cluster's client service account lets its tunnel reach the
// app and refuses a second service account of that cluster at the destination, by SPIFFE
// identity. Before the policy both reach it; once it is gone, both again.
func TestAuthorizationAcrossClusters(t *testing.T) {
	ctx := mc.Begin(t)
	p := mc.DataPlane(t, ctx)
	ha, ok := p.Env.(probe.HopAccess)
	if !ok {
		t.Skipf("provider %s does not let the test process dial the data plane's hops", mc.Provider.Name())
	}
	hops := ha.Hops()
	clientCA, err := mesh.IntermediateOf(mc.ObservedCluster().Name, hops.ClientCA)
	require.NoError(t, err)
	var paths []authzPath
	if p.Peer != nil && hops.PeerZtunnel.IsValid() {
		paths = append(paths, authzPath{"same network", p.Peer, probe.EchoPeer, func(c *pki.Cert) error { return reachEchoPeer(ctx, hops, c) }})
	}
	if p.Remote != nil && hops.RemoteGateway.IsValid() {
		paths = append(paths, authzPath{"other network", p.Remote, probe.EchoRemote, func(c *pki.Cert) error { return reachEchoRemote(ctx, hops, c) }})
	}
	if len(paths) == 0 {
		t.Skip("no path to another cluster the test process can dial")
	}
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) { allowOneCaller(t, ctx, clientCA, hops.ProbeNamespace, path) })
	}
}

// authzPath is a path to an app in another cluster, reached as a certificate's identity.
type authzPath struct {
	name  string
	at    *cluster.Cluster
	app   string
	reach func(cert *pki.Cert) error
}

// allowOneCaller puts an ALLOW for the client's service account on path's app and checks that it
// lets the client through and refuses another caller with 401 at the destination, until removed.
func allowOneCaller(t *testing.T, ctx context.Context, ca *pki.Intermediate, ns string, path authzPath) {
	reach := func(sa string) error {
		cert, err := ca.Issue(ns, sa, 0)
		require.NoError(t, err)
		return path.reach(cert)
	}
	require.NoError(t, reach("client"), "no policy: the client reaches %s", path.app)
	require.NoError(t, reach("intruder"), "no policy: any caller under the mesh root does")
	remove, err := mesh.ApplyPolicy(ctx, path.at, mesh.Policy{Namespace: ns, Name: "allow-client", App: path.app,
		Action: "ALLOW", Principals: []string{pki.TrustDomain + "/ns/" + ns + "/sa/client"}})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, remove(context.Background()))
		require.Eventually(t, func() bool { return reach("intruder") == nil }, policyWait, 200*time.Millisecond,
			"the policy's removal reaches %s's ztunnel", path.app)
	})
	var denied error
	require.Eventually(t, func() bool { denied = reach("intruder"); return denied != nil }, policyWait, 200*time.Millisecond,
		"the ALLOW for the client reaches %s's ztunnel and refuses another caller", path.app)
	var refused *hbone.RefusedError
	if assert.ErrorAs(t, denied, &refused, "refused at the destination's CONNECT") {
		assert.Equal(t, http.StatusUnauthorized, refused.StatusCode, "%v", denied)
	}
	assert.NoError(t, reach("client"), "the caller the policy allows, from the other cluster")
}

// reachEchoPeer opens an HBONE tunnel as cert straight to echo-peer's ztunnel, on the client's
// network, and gets one answer from its app through it.
func reachEchoPeer(ctx context.Context, hops probe.Hops, cert *pki.Cert) error {
	c := hbone.NewClient()
	defer c.Close()
	conn, err := c.Dial(ctx, hbone.Target{Addr: hops.PeerZtunnel.String(), Authority: hops.PeerEchoAuthority, TLS: pki.ClientConfig(cert, hops.Roots, hops.EchoID)})
	if err != nil {
		return err
	}
	defer conn.Close()
	return probeapp.FetchOver(conn, workload.ProbeHost(probe.EchoPeer))
}

// reachEchoRemote opens a double-HBONE tunnel as cert through the remote east-west gateway to
// echo-remote and gets one answer from its app through it.
func reachEchoRemote(ctx context.Context, hops probe.Hops, cert *pki.Cert) error {
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
