package local

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Waypoint applies gw and writes what istiod's deployment controller would have made of it: its
// service account, its Service and one pod on the first fake node, Running and Ready with an
// address from the plan (the status written as for scale pods).
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
	if err := mesh.ApplyGateway(ctx, c, gw); err != nil {
		return cluster.GatewayPod{}, err
	}
	core := c.Client.CoreV1()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: gw.Name, Namespace: gw.Namespace}}
	if _, err := core.ServiceAccounts(gw.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: waypoint %s/%s's service account: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	if _, err := core.Services(gw.Namespace).Create(ctx, mesh.GatewayService(gw, c.Network), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: waypoint %s/%s's Service: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	labels := mesh.GatewayPodLabels(gw, c.Network)
	pod, err := core.Pods(gw.Namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: gw.Name + "-0", Namespace: gw.Namespace, Labels: labels,
			Annotations: map[string]string{"istio.io/rev": "default"}},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: gw.Name, AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{Name: "istio-proxy", Image: "proxyv2",
				Ports: []corev1.ContainerPort{{Name: "status-port", ContainerPort: 15021, Protocol: corev1.ProtocolTCP}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: waypoint %s/%s's pod: %w", c.Name, gw.Namespace, gw.Name, err)
	}
	if err := workload.PatchPodStatus(ctx, c, pod, workload.RunningStatus(ip, hostIP, true)); err != nil {
		return cluster.GatewayPod{}, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return cluster.GatewayPod{Name: pod.Name, IP: ip.String(), Node: node, Labels: labels}, nil
}
