package incluster

import (
	"context"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
)

// EastWestGateway applies c's east-west Gateway (rendered with its istiod; istiod deploys it and
// a LoadBalancer gives it an address) and returns the address in its status.addresses, which is
// what other clusters' istiods read.
func (p *Provider) EastWestGateway(ctx context.Context, c *cluster.Cluster, timeout time.Duration) (string, error) {
	m, err := p.member(c.Name)
	if err != nil {
		return "", err
	}
	// Apply without the readiness wait: its address is the wait that matters, bounded by timeout.
	if err := p.applyWith(ctx, m, false, install.ComponentEastWestGateway); err != nil {
		return "", err
	}
	return install.EastWestAddress(ctx, c, timeout)
}

// serviceRange reads the cluster's ClusterIP range from the ServiceCIDR API (networking.k8s.io/v1,
// GA in Kubernetes 1.33; the API server creates the default object "kubernetes" from its
// --service-cluster-ip-range), so that an east-west address inside it is refused. Older servers
// and credentials without that read give no range: the check then falls back to the gateway
// Service's own ClusterIP.
func serviceRange(ctx context.Context, c *cluster.Cluster) netip.Prefix {
	sc, err := c.Client.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return netip.Prefix{}
	}
	for _, cidr := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(cidr); err == nil && p.Addr().Is4() {
			return p.Masked()
		}
	}
	return netip.Prefix{}
}

// EastWestGatewayPod is the pod istiod's deployment controller runs for c's east-west Gateway.
func (p *Provider) EastWestGatewayPod(ctx context.Context, c *cluster.Cluster, timeout time.Duration) (cluster.GatewayPod, error) {
	return mesh.WaitGatewayPod(ctx, c, mesh.SystemNamespace, mesh.EastWestGateway, timeout)
}

// Waypoint applies gw; istiod's deployment controller deploys it, and its pod is returned.
func (p *Provider) Waypoint(ctx context.Context, c *cluster.Cluster, gw *gatewayv1.Gateway, timeout time.Duration) (cluster.GatewayPod, error) {
	if err := mesh.ApplyGateway(ctx, c, gw); err != nil {
		return cluster.GatewayPod{}, err
	}
	return mesh.WaitGatewayPod(ctx, c, gw.Namespace, gw.Name, timeout)
}
