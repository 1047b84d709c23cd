package mesh_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/framework/provider/local/localtest"
)

// On a real API server with the pinned Gateway API CRDs: the east-west Gateway the local provider
// creates is the one every provider installs, with its address in status.addresses.
func TestEnsureEastWestGatewayOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	_, cs := localtest.APIServers(t, 1)
	c := cs[0]
	ctx := context.Background()
	root, err := bins.SourceRoot()
	require.NoError(t, err)
	set, err := crds.LoadGatewayAPI(ctx, root)
	require.NoError(t, err)
	require.NoError(t, crds.Apply(ctx, c.Dynamic, set))
	require.NoError(t, mesh.EnsureSystemNamespace(ctx, c))

	require.NoError(t, mesh.EnsureEastWestGateway(ctx, c, "127.201.0.1"))
	gws := c.GatewayAPI.GatewayV1().Gateways(mesh.SystemNamespace)
	gw, err := gws.Get(ctx, mesh.EastWestGateway, metav1.GetOptions{})
	require.NoError(t, err)
	want := mesh.NewEastWestGateway(c.Network)
	assert.Equal(t, want.Labels, gw.Labels)
	assert.Equal(t, want.Spec.GatewayClassName, gw.Spec.GatewayClassName)
	require.Len(t, gw.Spec.Listeners, 1)
	l := gw.Spec.Listeners[0]
	assert.Equal(t, gatewayv1.PortNumber(mesh.HBONEPort), l.Port)
	assert.Equal(t, gatewayv1.ProtocolType("HBONE"), l.Protocol)
	require.NotNil(t, l.TLS)
	assert.Equal(t, gatewayv1.TLSModeTerminate, *l.TLS.Mode)
	assert.Equal(t, gatewayv1.AnnotationValue("ISTIO_MUTUAL"), l.TLS.Options["gateway.istio.io/tls-terminate-mode"])
	require.Len(t, gw.Status.Addresses, 1)
	assert.Equal(t, "127.201.0.1", gw.Status.Addresses[0].Value)
	assert.Equal(t, gatewayv1.IPAddressType, *gw.Status.Addresses[0].Type)

}
