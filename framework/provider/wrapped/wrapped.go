// Package wrapped is a provider for tests of the seam: the local provider under another name,
// built from nothing but the registry (framework/provider), the contract (framework/cluster) and
// the probes' vocabulary (framework/probe). Only tests import it (one blank import in
// suites/multicluster/providers_test.go); the join suite passing through it shows that a new
// provider is its folder and one import line.
package wrapped

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/probe"
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

// Provider is the wrapped provider. It forwards every optional capability the inner provider
// offers, and only those (TestWrappedOffersWhatItWraps); its ControlPlane and Gateways are the
// inner ones, with what their values offer.
type Provider struct {
	cluster.Provider
	inner innerProvider
}

// innerProvider is what the local provider offers.
type innerProvider interface {
	cluster.Provider
	cluster.Snapshots
	cluster.HostProcesses
	cluster.FakeNodeProxies
	probe.Deployer
}

var _ innerProvider = (*Provider)(nil)

func newProvider(e provider.Env) (cluster.Provider, error) {
	p, err := provider.New(inner, e)
	if err != nil {
		return nil, err
	}
	in, ok := p.(innerProvider)
	if !ok {
		return nil, fmt.Errorf("-provider=%s: the %s provider it wraps no longer offers what it forwards (wrapped.innerProvider)", Name, inner)
	}
	return &Provider{Provider: p, inner: in}, nil
}

// Name is the registered name, not the inner provider's.
func (p *Provider) Name() string { return Name }

func (p *Provider) DeployProbes(ctx context.Context, s probe.Setup) (probe.Env, error) {
	return p.inner.DeployProbes(ctx, s)
}

func (p *Provider) ServeFakeNodes(ctx context.Context, c *cluster.Cluster, i cluster.Istiod, ca cluster.CACerts, nodes []string) (cluster.NodeCertificates, error) {
	return p.inner.ServeFakeNodes(ctx, c, i, ca, nodes)
}

func (p *Provider) SampleProcesses(ctx context.Context) cluster.ProcessSamples {
	return p.inner.SampleProcesses(ctx)
}

func (p *Provider) PreloadCRDs(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	return p.inner.PreloadCRDs(objs)
}
func (p *Provider) SeededCRDs() bool { return p.inner.SeededCRDs() }
func (p *Provider) SaveCRDSeed(ctx context.Context, c *cluster.Cluster) error {
	return p.inner.SaveCRDSeed(ctx, c)
}
func (p *Provider) PreloadWorkloads(w cluster.WorkloadSet) error { return p.inner.PreloadWorkloads(w) }
func (p *Provider) RestoredWorkloads(name string) (string, bool) {
	return p.inner.RestoredWorkloads(name)
}
func (p *Provider) SaveWorkloads(ctx context.Context, c *cluster.Cluster) error {
	return p.inner.SaveWorkloads(ctx, c)
}
