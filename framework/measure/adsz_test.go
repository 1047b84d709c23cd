package measure

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Clients tells ztunnels (by their Address watch), east-west gateways and waypoints (by the
// managed label istiod tells them by) apart, in an answer shaped as the pinned adsz's.
func TestClientsCountsEachKind(t *testing.T) {
	body := `{"totalClients":5,"clients":[
{"connectionId":"ztunnel-a.istio-system-1","labels":{"app":"ztunnel"},"watches":{"type.googleapis.com/istio.workload.Address":null,"type.googleapis.com/istio.security.Authorization":null}},
{"connectionId":"ztunnel-b.istio-system-2","watches":{"type.googleapis.com/istio.workload.Address":null}},
{"connectionId":"istio-eastwestgateway-0.istio-system-3","labels":{"gateway.istio.io/managed":"istio.io-eastwest-controller"},"watches":{"type.googleapis.com/envoy.config.cluster.v3.Cluster":["a"]}},
{"connectionId":"waypoint-0.scale-0-4","labels":{"gateway.istio.io/managed":"istio.io-mesh-controller"},"watches":{"type.googleapis.com/envoy.config.cluster.v3.Cluster":null}},
{"connectionId":"ingress-0.istio-system-5","labels":{"gateway.istio.io/managed":"istio.io-gateway-controller"},"watches":{"type.googleapis.com/envoy.config.cluster.v3.Cluster":null}}]}`
	i, _ := debugServer(t, AdszPath, &body)
	got, err := i.Clients(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Clients{ClientZtunnel: 2, ClientEastWest: 1, ClientWaypoint: 1, ClientOther: 1}, got)
}
