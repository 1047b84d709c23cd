package local

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/topology"
)

// TestEastWestGatewayKeepsItsAddress: a status write that replaces the Gateway's whole status
// from an older read, as istiod's status writer does, drops the address the provider wrote; the
// provider writes it again.
func TestEastWestGatewayKeepsItsAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	set, err := crds.Load(ctx, root)
	require.NoError(t, err)
	p := cachedProvider(t)
	p.opts.NoControllers = true
	topo, err := topology.Generate(1)
	require.NoError(t, err)
	require.NoError(t, p.Preflight(ctx, topo))
	slim, err := p.PreloadCRDs(set)
	require.NoError(t, err)
	cs, err := p.Create(ctx, topo)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Destroy(context.Background()) })
	c := cs[0]
	require.NoError(t, crds.Apply(ctx, c.Dynamic, slim))
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))

	address, err := p.EastWestGateway(ctx, c, 0)
	require.NoError(t, err)
	api := c.Dynamic.Resource(schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}).Namespace(mesh.SystemNamespace)
	gw, err := api.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
	require.NoError(t, err)
	addresses, _, _ := unstructured.NestedSlice(gw.Object, "status", "addresses")
	require.Len(t, addresses, 1)

	// The racing write: conditions only, the addresses gone.
	require.NoError(t, unstructured.SetNestedSlice(gw.Object, []any{map[string]any{
		"type": "Accepted", "status": "True", "reason": "Accepted", "message": "racing write",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": gw.GetGeneration(),
	}}, "status", "conditions"))
	unstructured.RemoveNestedField(gw.Object, "status", "addresses")
	_, err = api.UpdateStatus(ctx, gw, metav1.UpdateOptions{})
	require.NoError(t, err)

	assert.Eventually(t, func() bool {
		gw, err := api.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
		if err != nil {
			return false
		}
		list, _, _ := unstructured.NestedSlice(gw.Object, "status", "addresses")
		return len(list) == 1 && list[0].(map[string]any)["value"] == address
	}, 10*time.Second, 50*time.Millisecond, "the address is written again")
	p.mu.Lock()
	keepers := p.addressKeepers
	p.mu.Unlock()
	require.Len(t, keepers, 1)
	assert.Equal(t, 1, keepers[0].Restored())
}
