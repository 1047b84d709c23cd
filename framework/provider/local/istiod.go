package local

import (
	"context"
	"fmt"

	"github.com/ambientmc/ambientmc/emulator/dataplane/nodecerts"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/pki"
)

// IstiodPorts are istiod's listeners, all on 127.0.0.1.
type IstiodPorts = hostistiod.IstiodPorts

// StartIstiod runs pilot-discovery for cluster c as a plain process (framework/hostistiod) and
// tracks it for Destroy.
func (p *Provider) StartIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (cluster.Istiod, error) {
	if o.Name != "" {
		return nil, fmt.Errorf("istiod %s/%s: a second istiod is StartExtraIstiod's", c.Name, o.Name)
	}
	return p.startIstiod(ctx, c, o)
}

// StartExtraIstiod starts a second istiod for c beside its own, as a process like it
// (cluster.ExtraIstiods).
func (p *Provider) StartExtraIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (cluster.Istiod, error) {
	if o.Name == "" {
		return nil, fmt.Errorf("istiod %s: an extra istiod needs a name", c.Name)
	}
	return p.startIstiod(ctx, c, o)
}

func (p *Provider) startIstiod(ctx context.Context, c *cluster.Cluster, o cluster.IstiodOptions) (cluster.Istiod, error) {
	// As Istio's chart sets it for every istiod: ztunnel may ask for the identities of the pods on
	// its node, which the emulated ztunnels (emulator/dataplane/nodecerts) do. o.Env comes later
	// and wins.
	o.Env = append([]string{"CA_TRUSTED_NODE_ACCOUNTS=" + pki.IstioNamespace + "/" + nodecerts.ZtunnelAccount}, o.Env...)
	i, err := hostistiod.Start(ctx, c, o)
	if err != nil {
		return nil, err
	}
	p.track(i)
	return i, nil
}
