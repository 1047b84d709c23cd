package envoyxds

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pilot/pkg/model"

	"github.com/ambientmc/ambientmc/framework/mesh"
)

// proxyOf is the proxy istiod makes of a pod's node ID and metadata, with istiod's own parsers.
func proxyOf(t *testing.T, p Pod) *model.Proxy {
	t.Helper()
	meta, err := p.Metadata()
	require.NoError(t, err)
	md, err := model.ParseMetadata(meta)
	require.NoError(t, err)
	proxy, err := model.ParseServiceNodeWithMetadata(p.ID(), md)
	require.NoError(t, err)
	// Where istiod finds no pod at the proxy's address it takes the metadata's labels
	// (model.Proxy.SetWorkloadLabels); where it finds one, the pod's, which are the same.
	proxy.Labels = proxy.Metadata.Labels
	return proxy
}

// istiod takes the east-west gateway's node for an ambient east-west gateway of its network, and
// a waypoint's for a waypoint; both are waypoint-type proxies, as waypoint.yaml runs them.
func TestIstiodReadsTheNodeAsThePodsProxy(t *testing.T) {
	ew := proxyOf(t, eastWestPod())
	assert.Equal(t, model.Waypoint, ew.Type)
	assert.True(t, ew.IsAmbientEastWestGateway(), "east-west gateway by its managed label")
	assert.False(t, model.IsWaypointProxy(ew))
	assert.Equal(t, "istio-eastwestgateway-0.istio-system", ew.ID)
	assert.Equal(t, []string{"127.201.0.1"}, ew.IPAddresses)
	assert.Equal(t, "cluster-1", ew.Metadata.ClusterID.String())
	assert.Equal(t, "network-1", ew.Metadata.Network.String())
	assert.Equal(t, []string{"network-1"}, []string(ew.Metadata.RequestedNetworkView))
	assert.Equal(t, "istio-system", ew.Metadata.Namespace)
	assert.Equal(t, "istio-eastwestgateway", ew.Metadata.ServiceAccount)
	assert.Equal(t, "istio-eastwestgateway", ew.Metadata.Labels["gateway.networking.k8s.io/gateway-name"])
	assert.True(t, bool(ew.Metadata.EnableHBONE), "the ambient profile's proxyMetadata")
	assert.Equal(t, "cluster.local", ew.Metadata.MeshID, "no global.meshID: the trust domain")

	wp := eastWestPod()
	wp.Kind, wp.Namespace, wp.Gateway, wp.Name, wp.IP = Waypoint, "scale-0", "waypoint", "waypoint-0", "10.11.0.9"
	wp.Labels = mesh.GatewayPodLabels(mesh.NewWaypoint("scale-0"), "network-1")
	wp.Labels["pod-template-hash"] = "5d8f9c"
	wp.MeshID = "mesh1"
	w := proxyOf(t, wp)
	assert.Equal(t, model.Waypoint, w.Type)
	assert.True(t, model.IsWaypointProxy(w), "waypoint by its managed label")
	assert.False(t, w.IsAmbientEastWestGateway())
	assert.Empty(t, w.Metadata.RequestedNetworkView, "only the east-west controller's pods ask for their network's view")
	assert.Equal(t, "network-1", w.Metadata.Labels["topology.istio.io/network"], "defaulted by the deployment controller")
	assert.Equal(t, "service", w.Metadata.Labels["istio.io/waypoint-for"], "the Gateway's labels are the pod's")
	assert.Equal(t, "mesh1", w.Metadata.MeshID)
	assert.NotContains(t, w.Metadata.Labels, "pod-template-hash", "pilot-agent drops the Deployment's hash")
	assert.Equal(t, "waypoint~10.11.0.9~waypoint-0.scale-0~scale-0.svc.cluster.local", wp.ID())
}

func TestPodNeedsWhatTheNodeCarries(t *testing.T) {
	p := eastWestPod()
	p.IP = ""
	_, err := p.Metadata()
	require.Error(t, err)
	p = eastWestPod()
	p.Labels = map[string]string{"app": "x"}
	_, err = p.Metadata()
	require.ErrorContains(t, err, "gateway.istio.io/managed")
	p = eastWestPod()
	p.Kind = "router"
	_, err = p.Metadata()
	require.ErrorContains(t, err, `want "eastwest" or "waypoint"`)
}
