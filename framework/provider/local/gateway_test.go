package local

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
)

// TestEastWestGatewayKeepsItsAddress: a status write that replaces the Gateway's whole status
// from an older read, as istiod's status writer does, drops the address the provider wrote; the
// provider writes it again.
func TestEastWestGatewayKeepsItsAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	set := pinnedCRDs(t, ctx)
	p := cachedProvider(t)
	p.opts.NoControllers = true
	cs, slim := startClustersWithCRDs(t, ctx, p, 1, set)
	c := cs[0]
	require.NoError(t, crds.Apply(ctx, c.Dynamic, slim))
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))

	address, err := p.EastWestGateway(ctx, c, 0)
	require.NoError(t, err)
	api := c.GatewayAPI.GatewayV1().Gateways(mesh.SystemNamespace)
	gw, err := api.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, gw.Status.Addresses, 1)

	// The racing write: conditions only, the addresses gone.
	gw.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "racing write",
		LastTransitionTime: metav1.Now(), ObservedGeneration: gw.Generation}}
	gw.Status.Addresses = nil
	_, err = api.UpdateStatus(ctx, gw, metav1.UpdateOptions{})
	require.NoError(t, err)

	assert.Eventually(t, func() bool {
		gw, err := api.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
		if err != nil {
			return false
		}
		return len(gw.Status.Addresses) == 1 && gw.Status.Addresses[0].Value == address
	}, 10*time.Second, 50*time.Millisecond, "the address is written again")
	p.mu.Lock()
	keepers := p.addressKeepers
	p.mu.Unlock()
	require.Len(t, keepers, 1)
	// The keeper counts a restore once its patch has returned, which can be after the Get above
	// already saw the address.
	assert.Eventually(t, func() bool { return keepers[0].Restored() == 1 }, 5*time.Second, 10*time.Millisecond, "one restore")
}
