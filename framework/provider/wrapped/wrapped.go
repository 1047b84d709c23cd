// Package wrapped is a provider for tests of the seam: the local provider under another name,
// built from nothing but the registry (framework/provider) and the seam (framework/cluster). Only
// tests import it (one blank import in suites/multicluster/providers_test.go); the join suite
// passing through it shows that a new provider is its folder and one import line.
package wrapped

import (
	"context"
	"fmt"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/provider"
	_ "github.com/ambientmc/ambientmc/framework/provider/local" // registers the provider it wraps
)

// Name is the provider's -provider value.
const Name = "wrapped"

// inner is the registered provider this one wraps.
const inner = "local"

func init() {
	in, err := provider.Lookup(inner)
	if err != nil {
		panic(err)
	}
	provider.Register(provider.Spec{
		Name:         Name,
		Summary:      "the local provider under another name, for tests of the seam",
		Capabilities: in.Capabilities,
		Wraps:        inner, // -local.* flags reach the inner provider
		New:          newProvider,
		ForTests:     true,
	})
}

// Provider is the wrapped provider. Of the optional capabilities it offers the one the inner
// control plane cannot do without (istiod runs as a pilot-discovery process, so the environment
// must resolve one) and the data plane its DataPlane names; its ControlPlane is the inner one's,
// with what that offers.
type Provider struct {
	cluster.Provider
	binaries cluster.IstiodBinary
	probes   cluster.Probes
}

var (
	_ cluster.IstiodBinary = (*Provider)(nil)
	_ cluster.Probes       = (*Provider)(nil)
)

func newProvider(e provider.Env) (cluster.Provider, error) {
	p, err := provider.New(inner, e)
	if err != nil {
		return nil, err
	}
	ib, ok := p.(cluster.IstiodBinary)
	if !ok {
		return nil, fmt.Errorf("-provider=%s: the %s provider it wraps no longer runs istiod as a process", Name, inner)
	}
	probes, ok := p.(cluster.Probes)
	if !ok {
		return nil, fmt.Errorf("-provider=%s: the %s provider it wraps no longer runs a data plane", Name, inner)
	}
	return &Provider{Provider: p, binaries: ib, probes: probes}, nil
}

// Name is the registered name, not the inner provider's.
func (p *Provider) Name() string { return Name }

// DeployProbes is the inner provider's (cluster.Probes).
func (p *Provider) DeployProbes(ctx context.Context, s cluster.ProbeSetup) (cluster.ProbeEnv, error) {
	return p.probes.DeployProbes(ctx, s)
}

// ClusterBinaries are the inner provider's (cluster.IstiodBinary).
func (p *Provider) ClusterBinaries() []string { return p.binaries.ClusterBinaries() }
