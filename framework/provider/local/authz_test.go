package local

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
	"github.com/ambientmc/ambientmc/emulator/dataplane/hbone"
	"github.com/ambientmc/ambientmc/framework/bins/binstest"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/probeapp"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// ztunnel's L4 authorization in the emulated data plane, on what a real istiod makes of real
// AuthorizationPolicies: with none, tunnels from two identities both reach the echo pod; with an
// ALLOW naming one principal, the other's tunnel is refused and the named one's served; with a
// DENY of the named one added, it is refused too, by that policy.
func TestAuthorizationPoliciesDecideInboundTunnels(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pilot := binstest.PilotDiscovery(t, ctx)
	p := cachedProvider(t)
	cs, slim := startClustersWithCRDs(t, ctx, p, 1, pinnedCRDs(t, ctx))
	c := cs[0]
	require.NoError(t, crds.Apply(ctx, c.Dynamic, slim))
	e, root, inter, _ := probesOn(t, ctx, p, c, pilot)
	echo, ok := e.Server(probe.EchoLocal, c.Name)
	require.True(t, ok)
	sock, err := addrmap.Socket(echo.IP)
	require.NoError(t, err)
	echoID := pki.SPIFFEID(workload.ProbeNamespace, "echo")

	// reach opens a tunnel to the echo pod's application as service account sa and gets one
	// answer through it.
	reach := func(sa string) error {
		cert, err := inter.Issue(workload.ProbeNamespace, sa, time.Hour)
		require.NoError(t, err)
		client := hbone.NewClient()
		defer client.Close()
		conn, err := client.Dial(ctx, hbone.Target{Addr: net.JoinHostPort(sock.String(), strconv.Itoa(dataplane.HBONEPort)),
			Authority: net.JoinHostPort(echo.IP.String(), strconv.Itoa(workload.EchoPort)), TLS: pki.ClientConfig(cert, root.Pool(), echoID)})
		if err != nil {
			return err
		}
		defer conn.Close()
		return probeapp.FetchOver(conn, "echo")
	}
	refusedBy := func(err error) (string, bool) {
		var r *hbone.RefusedError
		if !errors.As(err, &r) || r.StatusCode != http.StatusUnauthorized {
			return "", false
		}
		return r.Reason, true
	}
	apply := func(name, action, principal string) {
		_, err := mesh.ApplyPolicy(ctx, c, mesh.Policy{Namespace: workload.ProbeNamespace, Name: name, Action: action, Principals: []string{principal}})
		require.NoError(t, err)
	}

	require.NoError(t, reach("client"), "no policy: allowed")
	require.NoError(t, reach("intruder"), "no policy: allowed")

	apply("allow-client", "ALLOW", pki.TrustDomain+"/ns/"+workload.ProbeNamespace+"/sa/client")
	var err2 error
	require.Eventually(t, func() bool { err2 = reach("intruder"); return err2 != nil }, 30*time.Second, 200*time.Millisecond,
		"an ALLOW policy that names another principal refuses the intruder")
	reason, refused := refusedBy(err2)
	assert.True(t, refused, "refused by authorization: %v", err2)
	assert.Contains(t, reason, "allowed by no policy")
	assert.NoError(t, reach("client"), "the principal the ALLOW policy names")

	apply("deny-client", "DENY", pki.TrustDomain+"/ns/"+workload.ProbeNamespace+"/sa/client")
	require.Eventually(t, func() bool { err2 = reach("client"); return err2 != nil }, 30*time.Second, 200*time.Millisecond,
		"a DENY of the allowed principal refuses it: DENY before ALLOW")
	reason, refused = refusedBy(err2)
	assert.True(t, refused, "refused by authorization: %v", err2)
	assert.Contains(t, reason, "denied by policy "+workload.ProbeNamespace+"/deny-client")
}
