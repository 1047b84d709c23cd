package local

import (
	"context"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/topology"
)

// The local provider runs istiod as a process, writes the east-west gateways' addresses itself and
// emulates the data plane in the test process.
func (p *Provider) ControlPlane() cluster.ControlPlane { return p }
func (p *Provider) Gateways() cluster.Gateways         { return p }

// track remembers an istiod so that Destroy stops it before the API servers go.
func (p *Provider) track(i *hostistiod.Process) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.istiods = append(p.istiods, i)
}

// EastWestGateway creates c's east-west Gateway and writes its address from the loopback plan,
// 127.(200+i).0.1, into its status, standing in for the LoadBalancer this provider lacks.
func (p *Provider) EastWestGateway(ctx context.Context, c *cluster.Cluster, _ time.Duration) (string, error) {
	gw, err := topology.GatewayIP(c.Index)
	if err != nil {
		return "", err
	}
	if err := mesh.EnsureEastWestGateway(ctx, c, gw.String()); err != nil {
		return "", err
	}
	k := mesh.KeepEastWestGatewayAddress(context.Background(), c, gw.String(), p.opts.Log)
	p.mu.Lock()
	p.addressKeepers = append(p.addressKeepers, k)
	p.mu.Unlock()
	return gw.String(), nil
}
