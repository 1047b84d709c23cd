// Package local is the embedded provider: per cluster one kube-apiserver on a shared etcd and one
// kube-controller-manager, all on 127.0.0.1 and built from pinned sources, with no kubelet or
// scheduler: the framework writes what those would.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ambientmc/ambientmc/framework/apiegress"
	"github.com/ambientmc/ambientmc/framework/bins"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/etcdstate"
	"github.com/ambientmc/ambientmc/framework/hostetcd"
	"github.com/ambientmc/ambientmc/framework/hostistiod"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/proc"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// Options configure the local provider.
type Options struct {
	// RunDir holds one directory per cluster: data, credentials (0600), logs and kubeconfigs.
	RunDir string
	// Cache builds and caches the binaries; nil means bins.Default().
	Cache *bins.Cache
	// Log receives progress lines.
	Log io.Writer
	// ReadyTimeout bounds how long one process may take to become ready.
	ReadyTimeout time.Duration
	// Istiods is how many istiods the run starts (0: one per primary) and PodsPerCluster the pods
	// each cluster gets; preflight sizes the host memory from them.
	Istiods, PodsPerCluster int
	// IstiodClusters names the clusters an istiod runs in when not every primary: the others are
	// built watched-only (watchedonly.go). Nil builds every cluster whole.
	IstiodClusters []string
	// NoControllers leaves kube-controller-manager out (-local.controllers=false), for comparisons:
	// then nothing publishes EndpointSlices, namespaces never finish deleting, and so on.
	NoControllers bool
	// Wave is how many clusters start at once (0: DefaultWave).
	Wave int
	// NodeMonitorGrace is the controller-manager's --node-monitor-grace-period (0:
	// nodeMonitorGrace); tests of the fake nodes set kube-controller-manager's own 50 s.
	NodeMonitorGrace time.Duration
	// APIServerGOGC, when above 0, is every API server's GOGC instead of what apiServerGC picks
	// for the run's size, for clusters that hold little (tests use SmallClustersGOGC). Preflight's
	// memory model does not count it.
	APIServerGOGC int
	// NoWorkloadSnapshots writes large scale workloads through the API on every run
	// (-local.snapshots=false) instead of restoring an earlier run's (workloads.go).
	NoWorkloadSnapshots bool
	// CertTTL is what the emulated data plane asks istiod's CA for each certificate (0: ztunnel's
	// default, 24 h); certificates are renewed at half their lifetime. Tests of the renewal set
	// it short.
	CertTTL time.Duration
	// Topology is the run's, for the setup estimates in Facts (nil: none).
	Topology *topology.Topology
	// OnReady is called with each cluster as soon as it is ready, from Create's goroutines; it
	// must return at once (Facts.ReadyEarly).
	OnReady func(*cluster.Cluster)
}

// SmallClustersGOGC is the API servers' GOGC for clusters that hold a few objects, as tests'
// clusters do: their heaps stay small at any setting, and make test is CPU-bound
// (docs/measurements.md#why-the-settings-are-what-they-are).
const SmallClustersGOGC = 400

// The optional capabilities the local provider offers (framework/cluster/seam.go).
var (
	_ cluster.Snapshots       = (*Provider)(nil)
	_ cluster.HostProcesses   = (*Provider)(nil)
	_ probe.Deployer          = (*Provider)(nil)
	_ cluster.ExtraIstiods    = (*Provider)(nil)
	_ cluster.FakeNodeProxies = (*Provider)(nil)
)

// Provider is the local provider.
type Provider struct {
	opts  Options
	paths map[bins.Binary]string

	mu      sync.Mutex
	etcd    *hostetcd.Etcd
	gcEnv   []string // the API servers' GC settings for this run's cluster count (apiServerGC)
	members []*member
	// noIstiod: the caller starts no istiod (benchmarks), so preflight asks for less memory.
	noIstiod bool
	// roomy: preflight found the memory for roomyGOGC (roomyGC).
	roomy bool
	// clusters is how many clusters the run has (Preflight): snapshots apply by the run's pods.
	clusters int
	// seedDir (default: beside the kube-apiserver binary) and seeds, whole and watched-only
	// clusters' (the key: watchedOnly): see seed.go.
	seedDir string
	seeds   map[bool]seedSlot
	// workloads is what every cluster gets, when snapshots apply; restored names the clusters that
	// started from a snapshot, and which (workloads.go).
	workloads *cluster.WorkloadSet
	restored  map[string]string
	snapDir   string
	istiods   []*hostistiod.Process
	slots     *slots
	keepers   []*workload.NodeKeeper
	// addressKeepers keep each east-west Gateway's status address (mesh.KeepEastWestGatewayAddress).
	addressKeepers []*mesh.AddressKeeper
	// waypoints counts each cluster's waypoint pods, which take reserved addresses in turn.
	waypoints map[string]int
	waves     []cluster.StartWave
	onReady   func(*cluster.Cluster) // Options.OnReady, or what a test sets
	egress    []*apiegress.Proxy
	// startingHook, when a test sets it, is called as each cluster begins to start.
	startingHook func(tc topology.Cluster)
	// claim, when a test sets it, replaces claimSlots.
	claim func(n int) (*slots, error)
}

// apiServerReadyTimeout stretches the readiness bound with the API servers that start together:
// the start is CPU-bound, about 3.4 s per API server on 2 cores when they all started at once (15 s
// for 10, 150-175 s for 50).
func apiServerReadyTimeout(base time.Duration, together int) time.Duration {
	return base + time.Duration(together)*6*time.Second
}

// New returns a local provider writing into opts.RunDir.
func New(opts Options) *Provider {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 3 * time.Minute
	}
	return &Provider{opts: opts, onReady: opts.OnReady}
}

// NewIfBuilt returns a provider on the default binary cache, or the binaries still missing from it
// (building them takes minutes, so tests skip instead).
func NewIfBuilt(opts Options) (*Provider, []bins.Binary, error) {
	cache, err := bins.Default()
	if err != nil {
		return nil, nil, err
	}
	missing, err := cache.Missing(bins.ClusterBinaries...)
	if err != nil || len(missing) > 0 {
		return nil, missing, err
	}
	cache.Log = io.Discard
	opts.Cache = cache
	return New(opts), nil, nil
}

func (p *Provider) Name() string   { return Name }
func (p *Provider) LogDir() string { return p.opts.RunDir }

// capabilities: the loopback address plan has room for topology.MaxClusters clusters, and only
// primaries are built.
var capabilities = topology.Capabilities{Provider: Name, MaxClusters: topology.MaxClusters,
	MaxClustersReason: fmt.Sprintf("its loopback address plan has room for %d", topology.MaxClusters)}

// Facts: every process on this host, on loopback; istiod a pilot-discovery process; clusters
// handed over as each is ready, in waves.
func (p *Provider) Facts() cluster.Facts {
	var names []string
	for _, b := range bins.ClusterBinaries {
		names = append(names, string(b))
	}
	f := cluster.Facts{DataPlane: report.DataPlaneEmulated, IstiodProcess: true, ClusterBinaries: names,
		OnLoopback: true, ReadyEarly: true, StartWaves: p.StartWaves(), WatchedOnlyCuts: p.watchedOnlyCuts()}
	if p.opts.Topology != nil {
		f.SetupEstimates = p.planSetup(p.opts.Topology)
	}
	return f
}

// Preflight validates the topology for this provider, checks host resources and makes sure the
// binaries are built (building them if missing).
func (p *Provider) Preflight(ctx context.Context, t *topology.Topology) error {
	if err := t.Check(capabilities); err != nil {
		return err
	}
	for _, c := range t.Clusters {
		if c.Kubeconfig != "" {
			fmt.Fprintf(p.opts.Log, "ambientmc: the local provider ignores the kubeconfig paths in %s (meta.kubeconfig) and starts its own API servers\n", t.Source)
			break
		}
	}
	need := p.hostMemory(t)
	if err := checkHost(len(t.Clusters), need); err != nil {
		return err
	}
	withRoomyGC := roomyNeed(t, need)
	avail, err := measure.HostMemoryAvailable()
	roomy := err == nil && p.roomyGC(t, withRoomyGC, avail)
	p.mu.Lock()
	p.roomy, p.clusters = roomy, len(t.Clusters)
	p.mu.Unlock()
	if roomy {
		fmt.Fprintf(p.opts.Log, "ambientmc: API servers run GOGC=%d, not Go's default: this host has %.1f GB available, the run about %.1f GB with it\n",
			roomyGOGC, float64(avail)/1e9, float64(withRoomyGC)/1e9)
	}
	// A cold build is in the run's plan (which refused a -timeout too short for it).
	return p.ensureBinaries(ctx)
}

// ensureBinaries builds what the clusters run into the cache, if missing, and keeps the paths.
func (p *Provider) ensureBinaries(ctx context.Context) error {
	cache := p.opts.Cache
	if cache == nil {
		var err error
		if cache, err = bins.Default(); err != nil {
			return err
		}
		cache.Log = p.opts.Log
	}
	var err error
	p.paths, err = cache.Ensure(ctx, bins.ClusterBinaries...)
	return err
}

// Create starts the clusters in waves (waves.go). On failure everything started is stopped.
func (p *Provider) Create(ctx context.Context, t *topology.Topology) ([]*cluster.Cluster, error) {
	if p.paths == nil {
		return nil, errors.New("local provider: Preflight must run before Create")
	}
	if err := os.MkdirAll(p.opts.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	claim := claimSlots
	if p.claim != nil {
		claim = p.claim
	}
	slots, err := claim(len(t.Clusters))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.slots = slots
	p.mu.Unlock()
	// The address plan follows the claimed indices: a second run on this machine gets the next
	// free ones, so its pod IPs, ClusterIPs and gateway addresses differ from the first's.
	for i := range t.Clusters {
		t.Clusters[i].Index = slots.indices[i]
	}
	etcd, err := hostetcd.Start(ctx, filepath.Join(p.opts.RunDir, "etcd"), p.paths[bins.Etcd], len(t.Clusters), p.opts.ReadyTimeout)
	if err != nil {
		p.stopAll()
		return nil, err
	}
	if nice, ok := hostetcd.Nice(len(t.Clusters)); ok {
		if err := proc.SetNice(etcd.Process().Pid(), nice); err != nil {
			fmt.Fprintf(p.opts.Log, "ambientmc: etcd keeps the default CPU priority (raising it needs root or CAP_SYS_NICE): %v\n", err)
		} else {
			fmt.Fprintf(p.opts.Log, "ambientmc: etcd runs at nice %d: %d clusters' API servers share it\n", nice, len(t.Clusters))
		}
	}
	p.mu.Lock()
	p.etcd = etcd
	p.gcEnv = p.opts.apiServerEnv(len(t.Clusters), p.roomy)
	p.mu.Unlock()
	out, err := p.startWaves(ctx, t, etcd)
	if err != nil {
		p.stopAll()
		return nil, err
	}
	return out, nil
}

// keepNodes renews the leases of c's fake nodes every 10 s, as kubelets do, where node lifecycle
// runs (not in watched-only clusters): it would mark the pods of nodes whose leases lapse
// NotReady. It starts as soon as c is ready, not after the last wave: restored workloads bring
// their nodes, whose leases would lapse while later waves start.
func (p *Provider) keepNodes(c *cluster.Cluster) {
	if p.opts.NoControllers || !needsLeaseRenewal(controllersFor(p.watchedOnly(c.Name))) {
		return
	}
	p.mu.Lock()
	p.keepers = append(p.keepers, workload.StartNodeKeeper(context.Background(), c, nodeLeaseRenewal, p.opts.Log))
	p.mu.Unlock()
}

// nodeLeaseRenewal is the kubelet's lease renewal interval (a quarter of the 40 s lease).
const nodeLeaseRenewal = 10 * time.Second

// startCluster starts one member: its egress proxy, API server and controller-manager.
func (p *Provider) startCluster(ctx context.Context, tc topology.Cluster, etcd *hostetcd.Etcd, together int) (*cluster.Cluster, error) {
	m := &member{topo: tc, dir: filepath.Join(p.opts.RunDir, tc.Name), paths: p.paths, timeout: apiServerReadyTimeout(p.opts.ReadyTimeout, together),
		etcd: etcd, gcEnv: p.gcEnv, controllers: !p.opts.NoControllers, nodeGrace: p.opts.NodeMonitorGrace,
		kcmArgs: endpointBatching(p.opts.PodsPerCluster), watchedOnly: p.watchedOnly(tc.Name)}
	p.mu.Lock()
	p.members = append(p.members, m)
	hook := p.startingHook
	p.mu.Unlock()
	if hook != nil {
		hook(tc)
	}
	start := time.Now()
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, err
	}
	egress, err := apiegress.Start(m.dir, tc.Name, p.opts.Log)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", tc.Name, err)
	}
	p.mu.Lock()
	p.egress = append(p.egress, egress)
	p.mu.Unlock()
	if m.egress, err = egress.WriteConfig(m.dir); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", tc.Name, err)
	}
	if seed := p.seedOf(m.watchedOnly); seed != nil {
		if err := etcdstate.WriteSeed(ctx, etcd, seed, hostetcd.Prefix(tc.Name)); err != nil {
			return nil, fmt.Errorf("cluster %s: storing the CRD seed: %w", tc.Name, err)
		}
	}
	if err := p.restoreWorkloads(ctx, etcd, tc); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", tc.Name, err)
	}
	c, err := m.start(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", tc.Name, err)
	}
	c.StartSeconds = time.Since(start).Seconds()
	p.keepNodes(c)
	what := "API server and controller-manager"
	if !m.controllers {
		what = "API server"
	}
	fmt.Fprintf(p.opts.Log, "ambientmc: %s: %s ready in %.1fs (kubeconfig %s)\n", tc.Name, what, c.StartSeconds, c.Kubeconfig)
	return c, nil
}

// Processes lists the running processes per cluster name (for RSS and CPU sampling); the shared
// etcd is in SharedProcesses.
func (p *Provider) Processes() map[string][]*proc.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]*proc.Process{}
	for _, m := range p.members {
		m.mu.Lock()
		for _, pr := range []*proc.Process{m.apiserver, m.kcm} {
			if pr != nil {
				out[m.topo.Name] = append(out[m.topo.Name], pr)
			}
		}
		m.mu.Unlock()
	}
	return out
}

// SharedProcesses lists the processes every cluster shares: the etcd.
func (p *Provider) SharedProcesses() []*proc.Process {
	p.mu.Lock()
	e := p.etcd
	p.mu.Unlock()
	if e == nil || e.Process() == nil {
		return nil
	}
	return []*proc.Process{e.Process()}
}

// SampleProcesses reads each cluster's API server and controller-manager, and the shared etcd
// with its database size (cluster.HostProcesses).
func (p *Provider) SampleProcesses(ctx context.Context) cluster.ProcessSamples {
	out := cluster.ProcessSamples{ByCluster: map[string][]cluster.ProcessSample{}}
	for name, procs := range p.Processes() {
		for _, pr := range procs {
			out.ByCluster[name] = append(out.ByCluster[name], sample(pr))
		}
	}
	p.mu.Lock()
	etcd := p.etcd
	p.mu.Unlock()
	for _, pr := range p.SharedProcesses() {
		s := sample(pr)
		if st, err := etcd.ReadStatus(ctx); err == nil {
			s.DatabaseBytes = &st.DBSize
		}
		out.Shared = append(out.Shared, s)
	}
	return out
}

// sample reads pr's figures; one it cannot read stays absent.
func sample(pr *proc.Process) cluster.ProcessSample {
	s := cluster.ProcessSample{Name: pr.Name()}
	if v, err := pr.RSSBytes(); err == nil {
		s.RSSBytes = &v
	}
	if v, err := pr.RSSFileBytes(); err == nil {
		s.RSSFileBytes = &v
	}
	if v, err := pr.CPUSeconds(); err == nil {
		s.CPUSeconds = &v
	}
	return s
}

// Destroy stops every process. The run directory is left for the caller to keep or remove.
func (p *Provider) Destroy(context.Context) error {
	p.stopAll()
	return nil
}

func (p *Provider) stopAll() {
	p.mu.Lock()
	members, istiods, etcd, keepers, egress, addressKeepers := p.members, p.istiods, p.etcd, p.keepers, p.egress, p.addressKeepers
	p.istiods, p.etcd, p.keepers, p.egress, p.addressKeepers = nil, nil, nil, nil, nil
	p.mu.Unlock()
	for _, k := range keepers {
		k.Stop()
	}
	for _, k := range addressKeepers {
		k.Stop()
	}
	proc.StopParallel(istiods, func(i *hostistiod.Process) { _ = i.Stop() })
	proc.StopParallel(members, (*member).stop)
	for _, e := range egress {
		e.Close()
	}
	// After every API server, so none logs a lost backend.
	if etcd != nil {
		etcd.Stop()
	}
	p.mu.Lock()
	if p.slots != nil {
		p.slots.release()
		p.slots = nil
	}
	p.mu.Unlock()
}
