package local

import (
	"context"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostdataplane"
	"github.com/ambientmc/ambientmc/framework/probe"
)

// DeployProbes runs the emulated data plane in the test process (framework/hostdataplane): the
// clusters here have no nodes to run it on.
func (p *Provider) DeployProbes(ctx context.Context, s probe.Setup) (probe.Env, error) {
	e, err := hostdataplane.Deploy(ctx, s, p.opts.CertTTL)
	if err != nil {
		return nil, err // not a nil *Env in a non-nil interface
	}
	return e, nil
}

// ServeFakeNodes stands in for the ztunnel of each of c's fake nodes (framework/hostdataplane).
func (p *Provider) ServeFakeNodes(ctx context.Context, c *cluster.Cluster, i cluster.Istiod, ca cluster.CACerts, nodes []string) (cluster.NodeCertificates, error) {
	return hostdataplane.ServeFakeNodes(ctx, c, i, ca, nodes, filepath.Join(p.opts.RunDir, c.Name, "fake-nodes"), p.opts.CertTTL, p.opts.Log)
}
