// Package kind is the kind provider: one single-node kind cluster per topology cluster, created
// with sigs.k8s.io/kind as a library, with MetalLB LoadBalancers for the east-west gateways and
// real istiod, ztunnel and gateways installed through the kube provider's in-cluster parts.
package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster/constants"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/topology"
)

// DefaultParallel bounds how many clusters are created at once. Parallel `kubeadm init`s are
// CPU- and disk-bound (Istio's CI gives each 180 s), every booting node draws on the host's shared
// inotify budget, and kind picks API-server host ports with a check-then-use race; three at a
// time keeps a laptop responsive and 10 clusters within a few minutes.
const DefaultParallel = 3

// InCluster is what kind reuses from the kube provider (framework/provider/kube) once its clusters
// run: istiod installed in the cluster, east-west gateways with LoadBalancer addresses, fortio
// probe pods, fake nodes kept Ready. Create hands it the clusters through their internal
// kubeconfigs (the node container IP, reachable from the host on Linux, as in Istio's CI).
type InCluster interface {
	Preflight(ctx context.Context, t *topology.Topology) error
	Create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error)
	Destroy(ctx context.Context) error
	ControlPlane() cluster.ControlPlane
	Gateways() cluster.Gateways
	Probes() cluster.Probes
}

// Options configure the kind provider.
type Options struct {
	// RunDir holds one directory per cluster (kubeconfigs, 0600) and, after a failure, logs/.
	RunDir string
	// Log receives progress lines.
	Log io.Writer
	// Image is the node image; "" means DefaultImage.
	Image string
	// Parallel bounds concurrent creates; 0 means DefaultParallel.
	Parallel int
	// Load lists image archives (docker image save, single-platform) loaded into every node.
	Load []string
	// Istio names the Istio images (hub and tag required).
	Istio install.Images
	// Keep leaves the clusters at Destroy and prints how to delete them.
	Keep bool
	// Wait bounds how long one cluster's control plane may take to be Ready; 0 means 3 minutes.
	Wait time.Duration
	// Deadline, if set, deletes every cluster at that time (before go test's -timeout panics and
	// leaves the containers behind).
	Deadline time.Time

	// Kind and Docker are the Docker seam; nil means kind's docker provider and the docker CLI.
	Kind   Kind
	Docker Docker
	// Host reads the machine's limits; nil means RealHost.
	Host *Host
	// InCluster supplies ControlPlane, Gateways and Probes; nil means those report that they
	// need the kube provider.
	InCluster InCluster
}

// The optional capabilities the kind provider offers (framework/cluster/seam.go).
var (
	_ cluster.ImageLister  = (*Provider)(nil)
	_ cluster.NodeImager   = (*Provider)(nil)
	_ cluster.LogCollector = (*Provider)(nil)
)

// Provider is the kind provider.
type Provider struct {
	opts   Options
	kind   Kind
	docker Docker
	host   Host
	// lb installs MetalLB with a pool into a ready cluster.
	lb func(ctx context.Context, c *cluster.Cluster, pool netip.Prefix) error

	mu       sync.Mutex
	created  []string // kind names, recorded before kind.Create is called
	closed   bool
	inflight sync.WaitGroup
	guard    *time.Timer
	// handedOver: InCluster.Create was called and InCluster.Destroy is due.
	handedOver  bool
	keptPrinted bool
}

// New returns a kind provider.
func New(o Options) *Provider {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	if o.Wait <= 0 {
		o.Wait = 3 * time.Minute
	}
	p := &Provider{opts: o, kind: o.Kind, docker: o.Docker, host: RealHost}
	if p.kind == nil {
		p.kind = NewKind(o.Log)
	}
	if p.docker == nil {
		p.docker = NewDocker()
	}
	if o.Host != nil {
		p.host = *o.Host
	}
	p.lb = p.installMetalLB
	return p
}

func (p *Provider) Name() string      { return Name }
func (p *Provider) DataPlane() string { return "ztunnel" }
func (p *Provider) LogDir() string    { return p.opts.RunDir }

// NodeImage is the node image every cluster runs, for the report.
func (p *Provider) NodeImage() string { return p.image() }

// Images is what the in-cluster part reads from the Istio pods (cluster.ImageLister).
func (p *Provider) Images(ctx context.Context) ([]cluster.Image, error) {
	if il, ok := p.opts.InCluster.(cluster.ImageLister); ok {
		return il.Images(ctx)
	}
	return nil, nil
}

func (p *Provider) image() string {
	if p.opts.Image == "" {
		return DefaultImage
	}
	return p.opts.Image
}

// capabilities: the address plan has room for 50 primaries.
var capabilities = topology.Capabilities{Provider: Name, MaxClusters: MaxClusters, MaxClustersReason: maxClustersReason}

// ControlPlane, Gateways and Probes are the kube provider's, over the kind clusters.
func (p *Provider) ControlPlane() cluster.ControlPlane {
	if p.opts.InCluster != nil {
		return p.opts.InCluster.ControlPlane()
	}
	return missingInCluster{}
}

func (p *Provider) Gateways() cluster.Gateways {
	if p.opts.InCluster != nil {
		return p.opts.InCluster.Gateways()
	}
	return missingInCluster{}
}

func (p *Provider) Probes() cluster.Probes {
	if p.opts.InCluster != nil {
		return p.opts.InCluster.Probes()
	}
	return missingInCluster{}
}

// missingInCluster stands in until the kube provider's in-cluster parts are wired in.
type missingInCluster struct{}

var errNoInCluster = errors.New("kind: istiod, east-west gateways and probes on kind clusters come from the kube provider's in-cluster implementation, which this build does not include")

func (missingInCluster) StartIstiod(context.Context, *cluster.Cluster, cluster.IstiodOptions) (cluster.Istiod, error) {
	return nil, errNoInCluster
}
func (missingInCluster) EastWestGateway(context.Context, *cluster.Cluster, time.Duration) (string, error) {
	return "", errNoInCluster
}
func (missingInCluster) DeployProbes(context.Context, cluster.ProbeSetup) (cluster.ProbeEnv, error) {
	return nil, errNoInCluster
}

// Paths of one cluster's files in the run directory.
func (p *Provider) clusterDir(name string) string { return filepath.Join(p.opts.RunDir, name) }

// KubeconfigPath is where cluster name's admin kubeconfig for the host is written (0600).
func (p *Provider) KubeconfigPath(name string) string {
	return filepath.Join(p.clusterDir(name), "kubeconfig")
}

// InternalKubeconfigPath is where cluster name's kubeconfig with the node's container IP is
// written (0600): it works from other kind clusters and, on Linux, from the host.
func (p *Provider) InternalKubeconfigPath(name string) string {
	return filepath.Join(p.clusterDir(name), "kubeconfig.internal")
}

// Create creates every cluster, at most Parallel at a time, then gives each a MetalLB pool. On
// error it collects kind's logs into RunDir/logs and deletes every cluster it started.
func (p *Provider) Create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	if err := os.MkdirAll(p.opts.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	p.mu.Lock()
	if p.guard == nil && !p.opts.Deadline.IsZero() {
		p.guard = time.AfterFunc(time.Until(p.opts.Deadline), func() {
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: the test's -timeout is about to expire: deleting every cluster now so none is left behind\n")
			_ = p.Destroy(context.Background())
		})
	}
	p.mu.Unlock()
	out, err := p.create(ctx, t)
	if err == nil {
		return out, nil
	}
	logs := p.CollectLogs()
	if nr := (*notReadyError)(nil); errors.As(err, &nr) && logs != "" {
		err = fmt.Errorf("%w%s", err, kubeletTail(logs, nr))
	}
	if p.opts.Keep {
		p.printKept()
	} else if derr := p.Destroy(context.Background()); derr != nil {
		err = fmt.Errorf("%w; deleting the clusters also failed: %v", err, derr)
	}
	if logs != "" {
		err = fmt.Errorf("%w (kind logs in %s)", err, logs)
	}
	return nil, err
}

func (p *Provider) create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	ports, err := freePorts(len(t.Clusters))
	if err != nil {
		return nil, err
	}
	out := make([]*cluster.Cluster, len(t.Clusters))
	sem := make(chan struct{}, p.opts.Parallel)
	g, gctx := errgroup.WithContext(ctx)
	for i, tc := range t.Clusters {
		g.Go(func() error {
			select {
			case sem <- struct{}{}:
			case <-gctx.Done():
				return gctx.Err()
			}
			defer func() { <-sem }()
			if err := gctx.Err(); err != nil {
				return err
			}
			c, err := p.createOne(gctx, tc, ports[i])
			if err != nil {
				return fmt.Errorf("cluster %s: %w", tc.Name, err)
			}
			out[i] = c
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := p.loadBalancers(ctx, out); err != nil {
		return nil, err
	}
	if err := p.handOver(ctx, t, out); err != nil {
		return nil, err
	}
	return out, nil
}

// handOver gives the ready clusters to the kube provider's in-cluster parts, which check them as
// they check any existing cluster and then keep their fake nodes Ready.
func (p *Provider) handOver(ctx context.Context, t *topology.Topology, cs []*cluster.Cluster) error {
	if p.opts.InCluster == nil {
		return nil
	}
	kt := *t
	// The kube provider refuses generated topologies (it needs existing clusters): these exist.
	kt.Source = "the kind clusters of this run"
	kt.Clusters = make([]topology.Cluster, len(t.Clusters))
	for i, c := range cs {
		kt.Clusters[i] = c.Cluster
		kt.Clusters[i].Kubeconfig = c.InternalKubeconfig
	}
	if err := p.opts.InCluster.Preflight(ctx, &kt); err != nil {
		return err
	}
	p.mu.Lock()
	p.handedOver = true
	p.mu.Unlock()
	if _, err := p.opts.InCluster.Create(ctx, &kt); err != nil {
		return err
	}
	return nil
}

// createOne creates one kind cluster and writes its two kubeconfigs.
func (p *Provider) createOne(ctx context.Context, tc topology.Cluster, port int) (*cluster.Cluster, error) {
	cfg, err := Config(tc, p.opts)
	if err != nil {
		return nil, err
	}
	cfg.Networking.APIServerPort = int32(port)
	name := cfg.Name
	dir := p.clusterDir(tc.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("the provider is being destroyed")
	}
	p.created = append(p.created, name)
	p.inflight.Add(1)
	p.mu.Unlock()
	start := time.Now()
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: creating %s (node image %s, pods %s, services %s)\n", tc.Name, name, p.image(), cfg.Networking.PodSubnet, cfg.Networking.ServiceSubnet)
	err = p.kind.Create(name, cfg, p.KubeconfigPath(tc.Name), p.opts.Wait)
	p.inflight.Done()
	if err != nil {
		return nil, fmt.Errorf("kind create %s: %w", name, err)
	}
	ext, err := p.kind.KubeConfig(name, false)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	if err := writePrivate(p.KubeconfigPath(tc.Name), []byte(ext)); err != nil {
		return nil, err
	}
	nodes, err := p.kind.ListInternalNodes(name)
	if err != nil {
		return nil, fmt.Errorf("nodes of %s: %w", name, err)
	}
	ip, cpNode, err := controlPlaneIP(nodes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	internal, err := p.kind.KubeConfig(name, true)
	if err != nil {
		return nil, fmt.Errorf("internal kubeconfig of %s: %w", name, err)
	}
	internalData, err := withServerHost(internal, ip)
	if err != nil {
		return nil, fmt.Errorf("internal kubeconfig of %s: %w", name, err)
	}
	if err := writePrivate(p.InternalKubeconfigPath(tc.Name), internalData); err != nil {
		return nil, err
	}
	if err := p.loadArchives(ctx, tc.Name, nodes); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", p.KubeconfigPath(tc.Name))
	if err != nil {
		return nil, err
	}
	c, err := cluster.New(tc, p.KubeconfigPath(tc.Name), p.InternalKubeconfigPath(tc.Name), rc)
	if err != nil {
		return nil, err
	}
	if err := waitNodeReady(ctx, c, name, cpNode, p.opts.Wait, start.Add(p.opts.Wait)); err != nil {
		return nil, err
	}
	c.StartSeconds = time.Since(start).Seconds()
	// Fake pods take addresses from the podCIDR node IPAM gives their node (Addresses.Plan nil).
	c.Addresses = cluster.Addresses{Pods: netip.MustParsePrefix(cfg.Networking.PodSubnet), Services: netip.MustParsePrefix(cfg.Networking.ServiceSubnet)}
	c.FakeNodes = cluster.FakeNodes{Taint: true, KeepReady: true}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: ready in %.1fs (kubeconfig %s, API server for other clusters https://%s:6443)\n", tc.Name, c.StartSeconds, c.Kubeconfig, ip)
	return c, nil
}

// loadBalancers cuts one pool per cluster from the kind network and installs MetalLB with it.
func (p *Provider) loadBalancers(ctx context.Context, cs []*cluster.Cluster) error {
	net, err := p.docker.Network(ctx, NetworkName())
	if err != nil {
		return fmt.Errorf("docker network inspect %s: %w", NetworkName(), err)
	}
	if err := CheckPlan(net, len(cs)); err != nil {
		return err
	}
	maxIndex := 0
	for _, c := range cs {
		maxIndex = max(maxIndex, c.Index)
	}
	pools, err := Pools(net, maxIndex)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, p.opts.Parallel)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range cs {
		g.Go(func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			pool := pools[c.Index-1]
			start := time.Now()
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: installing MetalLB with pool %s (cut from the kind network %s)\n", c.Name, pool, net.Subnet)
			if err := p.lb(gctx, c, pool); err != nil {
				return err
			}
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: MetalLB pool %s ready in %.1fs\n", c.Name, pool, time.Since(start).Seconds())
			return nil
		})
	}
	return g.Wait()
}

func (p *Provider) installMetalLB(ctx context.Context, c *cluster.Cluster, pool netip.Prefix) error {
	manifest, err := MetalLBManifest(ctx)
	if err != nil {
		return err
	}
	return InstallMetalLB(ctx, c, manifest, pool, 3*time.Minute)
}

// controlPlaneIP is the IPv4 address and the name of the cluster's control-plane node container
// (kind names the Kubernetes node as its container).
func controlPlaneIP(ns []nodes.Node) (ip, node string, err error) {
	for _, n := range ns {
		role, err := n.Role()
		if err != nil || role != constants.ControlPlaneNodeRoleValue {
			continue
		}
		v4, _, err := n.IP()
		if err != nil {
			return "", "", fmt.Errorf("control-plane node %s: reading its IP: %w", n.String(), err)
		}
		if v4 == "" {
			return "", "", fmt.Errorf("control-plane node %s has no IPv4 address", n.String())
		}
		return v4, n.String(), nil
	}
	return "", "", errors.New("no control-plane node")
}

// withServerHost rewrites every server of a kubeconfig to https://ip:<its port>, as Istio's
// kind_provisioner does (kind#1558): the node's hostname resolves only inside docker.
func withServerHost(kubeconfig, ip string) ([]byte, error) {
	cfg, err := clientcmd.Load([]byte(kubeconfig))
	if err != nil {
		return nil, err
	}
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("no clusters in kubeconfig")
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, err
		}
		port := u.Port()
		if port == "" {
			port = "6443"
		}
		u.Host = ip + ":" + port
		c.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

// writePrivate writes a credential file with mode 0600, also when it existed with another mode.
func writePrivate(path string, data []byte) error {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600)
}

// CollectLogs writes kind's logs of every created cluster to RunDir/logs/<name> (after a failed
// create, and when the env keeps a failed run's logs); it returns the directory, or "" when no
// cluster exists.
func (p *Provider) CollectLogs() string {
	p.mu.Lock()
	names := append([]string(nil), p.created...)
	p.mu.Unlock()
	if len(names) == 0 {
		return ""
	}
	dir := filepath.Join(p.opts.RunDir, "logs")
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: collecting the logs of %d clusters into %s\n", len(names), dir)
	for _, n := range names {
		if err := p.kind.CollectLogs(n, filepath.Join(dir, n)); err != nil {
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: collecting logs of %s: %v\n", n, err)
		}
	}
	return dir
}

// Destroy deletes every cluster Create started (after any kind create still running returns: kind
// cannot cancel one). It is idempotent and safe after a partial create. With Keep it deletes
// nothing and prints the commands that would.
func (p *Provider) Destroy(context.Context) error {
	p.mu.Lock()
	p.closed = true
	if p.guard != nil {
		p.guard.Stop()
	}
	p.mu.Unlock()
	p.inflight.Wait()
	if p.opts.Keep {
		p.printKept()
		return nil
	}
	p.mu.Lock()
	names := p.created
	p.created = nil
	handedOver := p.handedOver
	p.handedOver = false
	p.mu.Unlock()
	if handedOver {
		// The clusters go as a whole: the kube part only has to stop its port-forwards and
		// node keepers, not wait for its objects to be deleted one by one.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.opts.InCluster.Destroy(done)
	}
	if len(names) == 0 {
		return nil
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, p.opts.Parallel)
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := p.kind.Delete(n, p.KubeconfigPath(strings.TrimPrefix(n, NamePrefix)))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("kind delete cluster --name %s: %w", n, err))
				return
			}
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: deleted %s\n", n)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// printKept says which clusters -keep left and how to delete them.
func (p *Provider) printKept() {
	p.mu.Lock()
	names := append([]string(nil), p.created...)
	printed := p.keptPrinted
	p.keptPrinted = true
	p.mu.Unlock()
	sort.Strings(names)
	if len(names) == 0 || printed {
		return
	}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: -keep: %d clusters left running; delete them with:\n", len(names))
	for _, n := range names {
		fmt.Fprintf(p.opts.Log, "  kind delete cluster --name %s\n", n)
	}
}
