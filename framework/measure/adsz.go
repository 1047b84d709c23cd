package measure

import "context"

// AdszPath lists istiod's connected xDS clients (pilot/pkg/xds/debug.go adsz): each one's labels
// and the types it watches (its connection ID is the pod's name and namespace, no node type).
const AdszPath = "/debug/adsz"

// Kinds of xDS client istiod serves, as ClientsOf tells them apart.
const (
	ClientZtunnel  = "ztunnel"
	ClientEastWest = "eastwest"
	ClientWaypoint = "waypoint"
	ClientOther    = "other" // routers and sidecars, or a waypoint-type proxy of no known class
)

// Clients counts istiod's connected xDS clients by kind (ClientZtunnel, ...).
type Clients map[string]int

// Clients reads /debug/adsz and counts the clients by kind: a ztunnel by its watch of workload
// addresses (which only ztunnel asks for), a gateway or waypoint by the gateway.istio.io/managed
// label istiod tells them by (pilot/pkg/model/context.go IsAmbientEastWestGateway,
// IsWaypointProxy).
func (i *Sampler) Clients(ctx context.Context) (Clients, error) {
	var ads struct {
		Clients []struct {
			Labels  map[string]string `json:"labels"`
			Watches map[string]any    `json:"watches"`
		} `json:"clients"`
	}
	if err := i.getDebugJSON(ctx, AdszPath, &ads); err != nil {
		return nil, err
	}
	out := Clients{}
	for _, c := range ads.Clients {
		_, ztunnel := c.Watches[addressType]
		out[clientKind(ztunnel, c.Labels)]++
	}
	return out, nil
}

// addressType is the workload xDS type ztunnel watches (pilot/pkg/xds/v3 AddressType).
const addressType = "type.googleapis.com/istio.workload.Address"

func clientKind(ztunnel bool, labels map[string]string) string {
	if ztunnel {
		return ClientZtunnel
	}
	switch labels["gateway.istio.io/managed"] {
	case "istio.io-eastwest-controller":
		return ClientEastWest
	case "istio.io-mesh-controller":
		return ClientWaypoint
	}
	return ClientOther
}
