// Package kind is the kind provider: one single-node kind cluster per topology cluster, created
// with sigs.k8s.io/kind as a library, with MetalLB LoadBalancers for the east-west gateways and
// real istiod, ztunnel and gateways installed through framework/incluster.
package kind

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/images"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/kindnode"
	"github.com/ambientmc/ambientmc/framework/localregistry"
	"github.com/ambientmc/ambientmc/framework/mesh/install"
	"github.com/ambientmc/ambientmc/framework/nodeimages"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/topology"
)

// DefaultParallel bounds how many clusters are created at once. Parallel `kubeadm init`s are
// CPU- and disk-bound (Istio's CI gives each 180 s), every booting node draws on the host's shared
// inotify budget, and kind picks API-server host ports with a check-then-use race; three at a
// time keeps a laptop responsive and 10 clusters within a few minutes.
const DefaultParallel = 3

// InCluster is what kind composes above its nodes (framework/incluster) once its clusters
// run: istiod installed in the cluster, east-west gateways with LoadBalancer addresses, fortio
// probe pods, fake nodes kept Ready. Create hands it the clusters through their internal
// kubeconfigs (the node container IP, reachable from the host on Linux, as in Istio's CI).
type InCluster interface {
	Preflight(ctx context.Context, t *topology.Topology) error
	Create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error)
	Destroy(ctx context.Context) error
	Facts() cluster.Facts
	ControlPlane() cluster.ControlPlane
	Gateways() cluster.Gateways
}

// Options configure the kind provider.
type Options struct {
	// RunDir holds one directory per cluster (kubeconfigs, 0600) and, after a failure, logs/.
	RunDir string
	// Log receives progress lines.
	Log io.Writer
	// Image is the node image; "" means the one `make images` built (Built.Node).
	Image string
	// Guarded says the node image carries the framework's egress guard (framework/images): its
	// clusters then run the guard's bridge CNI instead of kindnetd, with a per-cluster node.env.
	Guarded bool
	// CgroupV1 says the host runs cgroup v1, which kubelet 1.35+ refuses unless told otherwise.
	CgroupV1 bool
	// Subnet is the run network's subnet (Guarded nodes allow it).
	Subnet netip.Prefix
	// Built names what `make images` builds (framework/images): the default node image and
	// Istio images, and the key a current node image carries.
	Built images.Set
	// Parallel bounds concurrent creates; 0 means DefaultParallel.
	Parallel int
	// Load lists image archives (docker image save, single-platform) loaded into every node.
	Load []string
	// DataPlane is the archive of the emulated data plane's images make images writes
	// (images.Set.DataPlane), loaded into every node before Load; empty where the run's Istio
	// images are not the built ones or run no data plane.
	DataPlane string
	// Istio names the Istio images (hub and tag required).
	Istio install.Images
	// Registry starts a registry on the run network (framework/localregistry, image Built.Registry)
	// and pushes the images only Docker's image store holds into it, for every node's containerd
	// to pull through its mirror, instead of importing them into each node.
	Registry bool
	// Keep leaves the clusters at Destroy, with their kubeconfigs and the record of what the run
	// made outside RunDir (Keep), and prints the one command that removes them (keep.go).
	Keep bool
	// Wait bounds how long one cluster's control plane may take to be Ready; 0 means 3 minutes.
	Wait time.Duration
	// Deadline, if set, deletes every cluster at that time (before go test's -timeout panics and
	// leaves the containers behind).
	Deadline time.Time

	// Kind and Docker are the Docker seam; nil means kind's docker provider and the docker CLI.
	Kind   Kind
	Docker dockerhost.Docker
	// Host reads the machine's limits; nil means RealHost.
	Host *Host
	// HostRoot is where the host's /proc/sys and /lib/modules are (dockerhost.RecordKernel); empty means /.
	HostRoot string
	// FreezerRoot is cgroup v1's freezer hierarchy, where Destroy thaws a node that will not die;
	// empty means /sys/fs/cgroup/freezer.
	FreezerRoot string
	// InCluster supplies ControlPlane, Gateways and Probes; nil means those report that they
	// need framework/incluster.
	InCluster InCluster
}

// node is what kindconfig.Config reads of the options.
func (o Options) node() kindconfig.Node {
	return kindconfig.Node{Image: o.Image, CgroupV1: o.CgroupV1, Guarded: o.Guarded, RunDir: o.RunDir, Registry: o.Registry}
}

// The optional capabilities the kind provider offers (framework/cluster/seam.go).
var _ cluster.Keeper = (*Provider)(nil)

// Provider is the kind provider.
type Provider struct {
	opts   Options
	kind   Kind
	docker dockerhost.Docker
	host   Host
	// lb installs MetalLB with a pool into a ready cluster.
	lb func(ctx context.Context, c *cluster.Cluster, pool netip.Prefix) error
	// reach checks this host routes to a node's API server (kindnode.Reachable).
	reach func(ctx context.Context, ip string) error

	// store holds the images the run starts that only Docker's image store has (preflight finds
	// them), saved once for every node.
	store *nodeimages.Store
	// registry is the run's registry, started with the network (-kind.registry).
	registry *localregistry.Registry

	mu      sync.Mutex
	netName string             // the run's docker network (runnet.go)
	net     dockerhost.Network // its subnet, chosen at preflight
	// netCreated: the network exists and Destroy removes it.
	netCreated bool
	// kernel is the host's kernel settings before the first node started (dockerhost.KernelState).
	kernel *dockerhost.KernelState
	// created are the kind names whose create was called and that are not deleted yet (recorded
	// before kind.Create is called; the second Ctrl-C's kill removes what is still here).
	created []string
	// closed: Destroy began; no create or network may start after it.
	closed bool
	// inflight are the kind creates running now, each closed when kind.Create returned.
	inflight map[string]chan struct{}
	// destroying runs one Destroy at a time (the teardown, Create's failure path and the deadline
	// guard may all call it), and orders the run network's creation against its removal.
	destroying sync.Mutex
	guard      *time.Timer
	// guarded: the node image carries the egress guard (preflight read its label).
	guarded bool
	// handedOver: InCluster.Create was called and InCluster.Destroy is due.
	handedOver bool
	// kept is what Keep wrote (keep.go); keptPrinted: its removal step was printed.
	kept        *cluster.Kept
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
	p := &Provider{opts: o, kind: o.Kind, docker: o.Docker, host: RealHost, netName: dockerhost.RunNetworkName(o.RunDir), inflight: map[string]chan struct{}{}}
	if p.kind == nil {
		p.kind = NewKind(o.Log)
	}
	if p.docker == nil {
		p.docker = dockerhost.NewDocker()
	}
	if o.Host != nil {
		p.host = *o.Host
	}
	p.store = &nodeimages.Store{Docker: p.docker, Dir: o.RunDir, Log: o.Log}
	p.lb = p.installMetalLB
	p.reach = kindnode.Reachable
	return p
}

func (p *Provider) Name() string { return Name }

func (p *Provider) LogDir() string { return p.opts.RunDir }

// Facts are the in-cluster part's (Istio from images, its data plane, platforms) and the node
// image every cluster runs.
func (p *Provider) Facts() cluster.Facts {
	f := cluster.Facts{DataPlane: p.opts.Istio.RunsDataPlane(), IstioImages: true, IstiodImageVersion: p.opts.Istio.Build}
	if p.opts.InCluster != nil {
		f = p.opts.InCluster.Facts()
	}
	f.NodeImage = p.image()
	return f
}

func (p *Provider) image() string {
	if p.opts.Image == "" {
		return p.opts.Built.Node
	}
	return p.opts.Image
}

// capabilities: the address plan has room for 50 primaries.
var capabilities = topology.Capabilities{Provider: Name, MaxClusters: kindconfig.MaxClusters, MaxClustersReason: kindconfig.MaxClustersReason}

// ControlPlane, Gateways and Probes are the in-cluster part's, over the kind clusters.
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

// WithDataPlane is the kind provider with Istio images that carry a data plane: it offers
// probe.Deployer through the in-cluster part's. Offered chooses.
type WithDataPlane struct{ *Provider }

// Offered is p as the contract sees it: offering probe.Deployer where its Istio images carry a data
// plane (the ones make images builds hold istiod only) and its in-cluster part deploys probes.
func (p *Provider) Offered() cluster.Provider {
	if _, ok := p.opts.InCluster.(probe.Deployer); !ok || p.opts.Istio.RunsDataPlane() == report.DataPlaneNone {
		return p
	}
	return WithDataPlane{p}
}

// DeployProbes is the in-cluster part's (probe.Deployer).
func (w WithDataPlane) DeployProbes(ctx context.Context, s probe.Setup) (probe.Env, error) {
	return w.opts.InCluster.(probe.Deployer).DeployProbes(ctx, s)
}

// missingInCluster stands in until the in-cluster part is wired in.
type missingInCluster struct{}

var errNoInCluster = errors.New("kind: istiod, east-west gateways and probes on kind clusters come from framework/incluster, which this build does not include")

func (missingInCluster) StartIstiod(context.Context, *cluster.Cluster, cluster.IstiodOptions) (cluster.Istiod, error) {
	return nil, errNoInCluster
}
func (missingInCluster) EastWestGateway(context.Context, *cluster.Cluster, time.Duration) (string, error) {
	return "", errNoInCluster
}
func (missingInCluster) EastWestGatewayPod(context.Context, *cluster.Cluster, time.Duration) (cluster.GatewayPod, error) {
	return cluster.GatewayPod{}, errNoInCluster
}
func (missingInCluster) Waypoint(context.Context, *cluster.Cluster, *gatewayv1.Gateway, time.Duration) (cluster.GatewayPod, error) {
	return cluster.GatewayPod{}, errNoInCluster
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
