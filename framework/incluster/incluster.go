// Package incluster installs and drives Istio ambient in real Kubernetes clusters, for every
// provider whose clusters are real (kube's existing ones, kind's containers): it checks the
// clusters before touching them, installs Istio with framework/mesh/install, reaches istiod
// through port-forwards, runs the probes as fortio pods and, at Destroy, removes exactly what the
// run created. A provider composes it above its nodes; it is no provider of its own.
package incluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// Options configure the in-cluster part.
type Options struct {
	// Name is the -provider value of the provider it serves, for its Name and messages.
	Name string
	// RunDir holds per-cluster logs (istiod's, port-forward errors).
	RunDir string
	// Log receives progress lines.
	Log io.Writer
	// Images are the Istio images to install; Hub and Tag are required.
	Images install.Images
	// ReuseIstio allows clusters that already run istiod: the install is server-side applied over
	// it, and what existed before is left (as modified) at teardown. A cacerts Secret is refused
	// regardless (the install will not replace a CA the cluster trusts).
	ReuseIstio bool
	// MeshID defaults to install.DefaultMeshID.
	MeshID string
	// InstallTimeout bounds each install component's readiness wait (default 5 minutes).
	InstallTimeout time.Duration
	// Platform is one of Istio's platforms (install.Platforms) for every cluster; "" means what
	// each cluster shows at preflight (platform.go).
	Platform string
	// SharedHost sizes the Istio components' requests for clusters sharing one small host
	// (install.Options.SharedHost): kind's.
	SharedHost bool
	// OnThisHost says the clusters run on this host (kind): the test host reaches the east-west
	// gateways' LoadBalancer addresses (MetalLB's pool is on the run's Docker network), so the
	// probes offer probe.HopAccess, and the host's CPU is the load's, so latency runs measure it.
	// Elsewhere a gateway's address is API data only and the load runs on a remote node.
	OnThisHost bool
}

// The optional capabilities the in-cluster part offers (framework/cluster/seam.go).
var (
	_ cluster.IstiodRestarter = (*IstiodPod)(nil)
	_ probe.Deployer          = WithDataPlane{}
	_ cluster.ExtraIstiods    = hostIstiods{}
)

// Provider is the in-cluster part as a cluster.Provider over clusters that exist.
type Provider struct {
	opts Options

	mu        sync.Mutex
	checked   *topology.Topology // the topology Preflight passed
	members   map[string]*member
	platforms map[string]cluster.Platform // by cluster, chosen at preflight
}

// member is one existing cluster and what this run did to it.
type member struct {
	c      *cluster.Cluster
	before *inventory
	// manifests are rendered once (StartIstiod) and reused for the gateway.
	manifests *install.Manifests
	installs  []*install.Installed // in apply order
	istiod    *IstiodPod
	// hostIstiods are second istiods run on this host (startHostIstiod).
	hostIstiods []*hostistiod.Process
	keeper      func() // stops KeepNodesReady
}

// keepReadyEvery is how often fake nodes' leases are renewed (the kubelet renews every 10 s).
const keepReadyEvery = 10 * time.Second

// New returns the in-cluster part, or an error naming the flag to fix.
func New(opts Options) (*Provider, error) {
	if opts.Name == "" {
		return nil, errors.New("incluster.New: Options.Name is empty: set the provider's name (kind, kube), which every message and the report carry")
	}
	if err := install.RequireImages(opts.Name, opts.Images); err != nil {
		return nil, err
	}
	if err := install.CheckPlatform(opts.Platform); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.InstallTimeout <= 0 {
		opts.InstallTimeout = 5 * time.Minute
	}
	return &Provider{opts: opts, members: map[string]*member{}, platforms: map[string]cluster.Platform{}}, nil
}

func (p *Provider) Name() string   { return p.opts.Name }
func (p *Provider) LogDir() string { return p.opts.RunDir }

// Facts: Istio from images (the version where make images built them), its platforms as chosen
// at preflight.
func (p *Provider) Facts() cluster.Facts {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := cluster.Facts{DataPlane: p.opts.Images.RunsDataPlane(), IstioImages: true, IstiodImageVersion: p.opts.Images.Build}
	for name, pl := range p.platforms {
		if pl.Name != "" {
			if f.Platforms == nil {
				f.Platforms = map[string]cluster.Platform{}
			}
			f.Platforms[name] = pl
		}
	}
	return f
}

func (p *Provider) Gateways() cluster.Gateways { return p }

// ControlPlane installs istiod in the clusters; where the images' build is known (the images make
// images builds, or -istio.build) it can also run a second istiod on this host
// (cluster.ExtraIstiods), from the build the cluster runs.
func (p *Provider) ControlPlane() cluster.ControlPlane {
	if p.opts.Images.Hub == images.IstioHub || p.opts.Images.Build != "" {
		return hostIstiods{p}
	}
	return p
}

// Create connects to every cluster of t (Preflight must have passed for t), records which of the
// objects the framework may create exist already, and starts keeping fake nodes Ready. The
// internal kubeconfig (what other clusters' istiods use) is the same file: the topology formats
// carry one kubeconfig per cluster, so its server must be reachable from the other clusters.
func (p *Provider) Create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	p.mu.Lock()
	checked := p.checked == t
	p.mu.Unlock()
	if !checked {
		return nil, fmt.Errorf("%s provider: Preflight must pass for this topology before Create", p.opts.Name)
	}
	if err := os.MkdirAll(p.opts.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	out := make([]*cluster.Cluster, len(t.Clusters))
	g, gctx := errgroup.WithContext(ctx)
	for i, tc := range t.Clusters {
		g.Go(func() error {
			start := time.Now()
			cfg, err := clientcmd.BuildConfigFromFlags("", tc.Kubeconfig)
			if err != nil {
				return fmt.Errorf("cluster %s: kubeconfig %s: %w", tc.Name, tc.Kubeconfig, err)
			}
			c, err := cluster.New(tc, tc.Kubeconfig, tc.Kubeconfig, cfg)
			if err != nil {
				return err
			}
			c.Runs = cluster.Components{Controllers: true, Scheduler: true}
			c.Addresses.Services = serviceRange(gctx, c)
			before, err := takeInventory(gctx, c)
			if err != nil {
				return fmt.Errorf("cluster %s: listing existing objects: %w", tc.Name, err)
			}
			c.StartSeconds = time.Since(start).Seconds()
			m := &member{c: c, before: before}
			m.keeper = workload.KeepNodesReady(context.Background(), c, keepReadyEvery, p.opts.Log)
			p.mu.Lock()
			p.members[tc.Name] = m
			p.mu.Unlock()
			fmt.Fprintf(p.opts.Log, "ambientmc: %s: connected to %s (Kubernetes %s)\n", tc.Name, cfg.Host, c.KubernetesVersion)
			out[i] = c
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		_ = p.Destroy(context.Background())
		return nil, err
	}
	return out, nil
}

func (p *Provider) member(name string) (*member, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.members[name]
	if m == nil {
		return nil, fmt.Errorf("%s provider: cluster %s was not created by this provider", p.opts.Name, name)
	}
	return m, nil
}

// Destroy stops the istiod handles and the fake-node keepers, tears down every install in reverse
// order and deletes the framework's objects created during the run (see inventory.go). Clusters
// are cleaned in parallel; errors name the cluster.
func (p *Provider) Destroy(ctx context.Context) error {
	p.mu.Lock()
	members := p.members
	p.members = map[string]*member{}
	p.mu.Unlock()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.destroyMember(ctx, m); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("cluster %s: %w", m.c.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (p *Provider) destroyMember(ctx context.Context, m *member) error {
	if m.keeper != nil {
		m.keeper()
	}
	var errs []error
	for _, i := range m.hostIstiods {
		_ = i.Stop()
	}
	if m.istiod != nil {
		m.istiod.closeLocal()
	}
	for i := len(m.installs) - 1; i >= 0; i-- {
		if err := m.installs[i].Teardown(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeCreated(ctx, m.c, m.before, p.opts.Log); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (p *Provider) clusterDir(name string) (string, error) {
	dir := filepath.Join(p.opts.RunDir, name)
	return dir, os.MkdirAll(dir, 0o700)
}
