package kube

import (
	"context"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
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
