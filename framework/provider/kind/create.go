package kind

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster/constants"
	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/kindnode"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/topology"
)

// Create creates every cluster, at most Parallel at a time, then gives each a MetalLB pool. On
// error it collects kind's logs into RunDir/logs and deletes every cluster it started.
func (p *Provider) Create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	if err := os.MkdirAll(p.opts.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	p.mu.Lock()
	if p.kernel == nil {
		p.kernel = dockerhost.RecordKernel(cmp.Or(p.opts.HostRoot, "/"))
		proc.OnKill(p.killNow)
	}
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
	if p.stopping() {
		// Destroy is removing the clusters from under the create (Ctrl-C, SIGTERM, the deadline
		// guard): there are no logs to collect, and returning waits for it to finish.
		if derr := p.Destroy(context.Background()); derr != nil {
			err = fmt.Errorf("%w; deleting the clusters also failed: %v", err, derr)
		}
		return nil, err
	}
	logs := p.CollectLogs()
	if nr := (*kindnode.NotReadyError)(nil); errors.As(err, &nr) && logs != "" {
		err = fmt.Errorf("%w%s", err, kindnode.KubeletTail(logs, nr))
	}
	// With Keep the clusters stay: the teardown (Keep, Destroy) says how to remove them.
	if !p.opts.Keep {
		if derr := p.Destroy(context.Background()); derr != nil {
			err = fmt.Errorf("%w; deleting the clusters also failed: %v", err, derr)
		}
	}
	if logs != "" {
		err = fmt.Errorf("%w (kind logs in %s)", err, logs)
	}
	return nil, err
}

func (p *Provider) create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	if err := p.createRunNetwork(ctx); err != nil {
		return nil, err
	}
	if p.opts.Registry {
		if err := p.startRegistry(ctx); err != nil {
			return nil, err
		}
	}
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
	if err := p.routeSharedNetworks(ctx, out); err != nil {
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

// handOver gives the ready clusters to the in-cluster part (framework/incluster), which check them as
// they check any existing cluster and then keep their fake nodes Ready.
func (p *Provider) handOver(ctx context.Context, t *topology.Topology, cs []*cluster.Cluster) error {
	if p.opts.InCluster == nil {
		return nil
	}
	kt := *t
	// The in-cluster part refuses generated topologies (it needs existing clusters): these exist.
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
	if p.closed {
		p.mu.Unlock()
		return errStopped
	}
	p.handedOver = true
	p.mu.Unlock()
	if _, err := p.opts.InCluster.Create(ctx, &kt); err != nil {
		return err
	}
	return nil
}

// createOne creates one kind cluster and writes its two kubeconfigs.
func (p *Provider) createOne(ctx context.Context, tc topology.Cluster, port int) (*cluster.Cluster, error) {
	o := p.opts
	p.mu.Lock()
	o.Guarded, o.Subnet, o.CgroupV1 = p.guarded, p.net.Subnet, dockerhost.CgroupV1()
	p.mu.Unlock()
	if o.Image == "" {
		o.Image = p.image()
	}
	cfg, err := kindconfig.Config(tc, o.node())
	if err != nil {
		return nil, err
	}
	cfg.Networking.APIServerPort = int32(port)
	name := cfg.Name
	dir := p.clusterDir(tc.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if o.Guarded {
		env, err := kindconfig.NodeEnv(tc.Index, o.Subnet)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(kindconfig.NodeEnvPath(o.RunDir, tc.Name), []byte(env), 0o644); err != nil {
			return nil, err
		}
	}
	done, err := p.startCreate(name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: creating %s (node image %s, pods %s, services %s)\n", tc.Name, name, p.image(), cfg.Networking.PodSubnet, cfg.Networking.ServiceSubnet)
	err = p.kind.Create(name, cfg, p.KubeconfigPath(tc.Name), p.opts.Wait)
	if stopped := p.endCreate(name, done); stopped {
		// Destroy removed (or is removing) its nodes: nothing of it may be touched any more.
		return nil, fmt.Errorf("kind create %s: %w", name, errStopped)
	}
	if err != nil && !exportFailedOnInternalNetwork(err) {
		return nil, fmt.Errorf("kind create %s: %w", name, err)
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
	// The run network is internal: Docker's port published on 127.0.0.1 does not answer there,
	// so the test process too reaches the API server at the node's address.
	if err := writePrivate(p.KubeconfigPath(tc.Name), internalData); err != nil {
		return nil, err
	}
	if err := p.reach(ctx, ip); err != nil {
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
	if err := kindnode.WaitReady(ctx, c, name, cpNode, p.opts.Wait, start.Add(p.opts.Wait)); err != nil {
		return nil, err
	}
	if o.Guarded {
		if err := kindnode.Check(ctx, c, nodes, cpNode, tc.Index); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	c.StartSeconds = time.Since(start).Seconds()
	// Fake pods take addresses from the podCIDR node IPAM gives their node (Addresses.Plan nil).
	c.Addresses = cluster.Addresses{Pods: netip.MustParsePrefix(cfg.Networking.PodSubnet), Services: netip.MustParsePrefix(cfg.Networking.ServiceSubnet)}
	c.Runs = cluster.Components{Controllers: true, Scheduler: true}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: ready in %.1fs (kubeconfig %s, API server for other clusters https://%s:6443)\n", tc.Name, c.StartSeconds, c.Kubeconfig, ip)
	return c, nil
}

// errStopped is what a create returns once Destroy began (Ctrl-C, SIGTERM, the deadline guard).
var errStopped = errors.New("stopped: the run is removing its clusters")

// startCreate records kind name as created and in flight, before kind.Create is called, so that a
// Destroy from now on removes it; it refuses once Destroy began. done is closed by endCreate.
func (p *Provider) startCreate(name string) (done chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errStopped
	}
	p.created = append(p.created, name)
	done = make(chan struct{})
	p.inflight[name] = done
	return done, nil
}

// endCreate marks kind name's create returned and says whether Destroy began meanwhile.
func (p *Provider) endCreate(name string, done chan struct{}) (stopped bool) {
	p.mu.Lock()
	delete(p.inflight, name)
	stopped = p.closed
	p.mu.Unlock()
	close(done)
	return stopped
}

// exportFailedOnInternalNetwork recognizes the one step of kind's create that an internal network
// fails: the last one, writing a kubeconfig for the API server port Docker published on 127.0.0.1
// (an internal network publishes none). The cluster is up by then; the framework writes its own
// kubeconfigs, at the node's address, and waits for the node to be Ready itself.
func exportFailedOnInternalNetwork(err error) bool {
	return strings.Contains(err.Error(), "failed to get api server port")
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

// stopping says the run is ending early: Destroy began, or a signal is being handled (its
// teardown calls Destroy; the terminal's Ctrl-C also reached kind's docker commands).
func (p *Provider) stopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed || proc.Interrupted()
}
