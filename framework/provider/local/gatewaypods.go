package local

import (
	"context"
	"fmt"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// istiod here deploys no gateway (its injection templates are off): the east-west gateway is the
// emulated one at the Gateway's address, and a waypoint's objects are written as its template
// would have made them.

// EastWestGatewayPod is the emulated east-west gateway of c, as a pod of istiod's template would
// present it: no pod object exists, so nothing of the cluster's state changes (a Service named
// after the gateway would even replace its address: notes/istio-embedded.md section 9).
func (p *Provider) EastWestGatewayPod(_ context.Context, c *cluster.Cluster, _ time.Duration) (cluster.GatewayPod, error) {
	gw, err := topology.GatewayIP(c.Index)
	if err != nil {
		return cluster.GatewayPod{}, err
	}
	return cluster.GatewayPod{Name: mesh.EastWestGateway + "-emulated", IP: gw.String(),
		Labels: mesh.GatewayPodLabels(mesh.NewEastWestGateway(c.Network), c.Network)}, nil
}

// waypointSlot is the first slot of the reserved pod addresses (workload.ReservedPodIPs) waypoint
// pods take; the probe pods take the first few.
const waypointSlot = 128

// Waypoint gives waypoint gw a reserved pod address of the plan and a pod on the first fake node,
// and writes what istiod's deployment controller would have made of it (mesh.WriteWaypoint).
func (p *Provider) Waypoint(ctx context.Context, c *cluster.Cluster, gw *gatewayv1.Gateway, _ time.Duration) (cluster.GatewayPod, error) {
	p.mu.Lock()
	if p.waypoints == nil {
		p.waypoints = map[string]int{}
	}
	slot := waypointSlot + p.waypoints[c.Name]
	p.waypoints[c.Name]++
	p.mu.Unlock()
	if slot >= workload.ReservedPodIPs {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: more than %d waypoints do not fit the reserved pod addresses", c.Name, workload.ReservedPodIPs-waypointSlot)
	}
	ip, err := c.Addresses.Plan.PodIP(slot)
	if err != nil {
		return cluster.GatewayPod{}, err
	}
	node := workload.NodeName(0)
	hostIP, err := workload.InternalIP(ctx, c, node)
	if err != nil {
		return cluster.GatewayPod{}, err
	}
	return mesh.WriteWaypoint(ctx, c, gw, ip, hostIP, node)
}
