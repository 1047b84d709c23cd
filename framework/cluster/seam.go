package cluster

import (
	"context"
	"crypto/x509"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/ambientmc/ambientmc/topology"
)

// The interfaces below are what differs between providers after Create. framework/mesh and the
// suites talk only to these; each provider implements them under framework/provider/<name>.

// ControlPlane runs istiod for primary clusters.
type ControlPlane interface {
	// StartIstiod starts (local) or installs (kind, kube) the istiod of primary c and waits until
	// it is ready.
	StartIstiod(ctx context.Context, c *Cluster, o IstiodOptions) (Istiod, error)
}

// IstiodOptions configure one istiod.
type IstiodOptions struct {
	// CA is the cluster's plugged-in intermediate (the cacerts secret).
	CA CACerts
	// Binary is the pilot-discovery to run, for providers that run istiod as a process.
	Binary string
	// Name is "" for the cluster's own istiod, and names an additional one (ExtraIstiods).
	Name string
	// Env is extra environment for istiod (feature flags, PILOT_MULTICLUSTER_KUBECONFIG_PATH).
	Env []string
	// Dir is a working directory for the istiod's files and logs.
	Dir string
}

// CACerts is a cluster's plugged-in intermediate CA as Istio's cacerts secret holds it: ca-cert.pem,
// ca-key.pem, cert-chain.pem (the intermediate, then the root) and root-cert.pem.
type CACerts struct {
	CertPEM, KeyPEM, ChainPEM, RootPEM []byte
}

// Empty says no CA was given.
func (c CACerts) Empty() bool { return len(c.CertPEM) == 0 }

// Istiod is one running istiod as the framework reaches it.
type Istiod interface {
	// Cluster is the name of the cluster this istiod serves.
	Cluster() string
	// Endpoints are where the framework reads istiod's metrics, ControlZ and debug handlers.
	Endpoints() IstiodEndpoints
	// XDSAddress is istiod's secure xDS port (15012) as the test process reaches it.
	XDSAddress() string
	// LogFile is where istiod's log is kept (for failure messages).
	LogFile() string
	// Tail returns the last n lines of istiod's log.
	Tail(n int) string
	// Done is closed when istiod has exited (the process, or the pod).
	Done() <-chan struct{}
	// ExitErr says how istiod exited, once Done is closed.
	ExitErr() error
	// Kill ends istiod abruptly (SIGKILL, or a pod deletion with no grace period), for failure tests.
	Kill() error
	// Stop ends istiod and waits for it.
	Stop() error
}

// IstiodEndpoints are where the test process reads one istiod (loopback ports, or a
// port-forward's), and its process where it runs on this host.
type IstiodEndpoints struct {
	// Name identifies the istiod in errors (cluster/pod or cluster/istiod-name).
	Name string
	// MetricsURL is istiod's Prometheus endpoint (http://127.0.0.1:P/metrics), CtrlzURL its
	// ControlZ base (http://127.0.0.1:P), DebugURL the base of its /debug handlers.
	MetricsURL, CtrlzURL, DebugURL string
	// PID is istiod's process ID on this host, which a restart in place changes; nil where istiod
	// runs elsewhere (a pod).
	PID func() int
	// MemoryCgroup is the directory of the memory cgroup that holds istiod alone, for its working
	// set as kubelet computes a container's ("" where there is none); it changes with PID.
	MemoryCgroup func() string
}

// Gateways give each cluster's east-west gateway the address other clusters' istiods use, and
// say which pod serves a gateway: the one whose proxy is istiod's client.
type Gateways interface {
	// EastWestGateway makes sure c has its east-west Gateway and returns the address in its
	// status.addresses (written by the local provider; assigned by a LoadBalancer elsewhere).
	EastWestGateway(ctx context.Context, c *Cluster, timeout time.Duration) (string, error)
	// EastWestGatewayPod is the pod serving c's east-west gateway (after EastWestGateway), waited
	// for up to timeout: the one istiod's deployment controller made where istiod deploys
	// gateways (kind, kube); where it deploys none (local), the emulated gateway at the Gateway's
	// address, with the labels istiod's template would give its pod.
	EastWestGatewayPod(ctx context.Context, c *Cluster, timeout time.Duration) (GatewayPod, error)
	// Waypoint makes sure c runs waypoint gw (a Gateway of class istio-waypoint, applied here) and
	// returns the pod serving it once Running with an address: istiod's deployment controller
	// deploys it where istiod deploys gateways (kind, kube); the local provider writes what that
	// would have (the service account, the Service and the pod, whose status the framework
	// writes as for scale pods).
	Waypoint(ctx context.Context, c *Cluster, gw *gatewayv1.Gateway, timeout time.Duration) (GatewayPod, error)
}

// GatewayPod is the pod of a gateway or waypoint as its proxy presents itself to istiod.
type GatewayPod struct {
	Name, IP, Node string
	// Labels are the pod's (the Deployment's pod-template-hash included where there is one).
	Labels map[string]string
	// MeshID is the pod's ISTIO_META_MESH_ID ("" where none is set: the trust domain).
	MeshID string
}

// Probes is offered by providers that run a data plane (Provider.DataPlane is not "none"): it
// deploys the probe workloads that carry the data-plane suites' traffic.
type Probes interface {
	// DeployProbes creates the probe services in every cluster, the client and echo-local in
	// s.Local, echo-remote in s.Remote, echo-peer in s.Peer and echo-failover in s.Local and
	// s.Failover(), and starts whatever carries their traffic.
	DeployProbes(ctx context.Context, s ProbeSetup) (ProbeEnv, error)
}

// ProbeSetup is what a provider needs to deploy the probes.
type ProbeSetup struct {
	Clusters []*Cluster
	// Local is the client's cluster. Remote is a cluster on another network (nil when every
	// cluster shares the client's), reached through its east-west gateway; Peer another cluster
	// on the client's own network (nil when it has none), reached directly.
	Local, Remote, Peer *Cluster
	Istiods             map[string]Istiod // by cluster
	CAs                 map[string]CACerts
	Roots               *x509.CertPool
	Dir                 string
	Logf                func(format string, args ...any)
}

// ChooseServers sets Remote and Peer: the first primary of Clusters on another network, and the
// first on the client's own, of those running an istiod.
func (s *ProbeSetup) ChooseServers(runsIstiod func(*Cluster) bool) {
	for _, c := range s.Clusters {
		if c.Name == s.Local.Name || !c.IsPrimary() || !runsIstiod(c) {
			continue
		}
		switch topology.RelationOf(s.Local.Cluster, c.Cluster) {
		case topology.OtherNetwork:
			if s.Remote == nil {
				s.Remote = c
			}
		case topology.SameNetwork:
			if s.Peer == nil {
				s.Peer = c
			}
		}
	}
}

// Failover is where echo-failover's second endpoint runs: the other network's cluster, else the
// same network's.
func (s ProbeSetup) Failover() *Cluster {
	if s.Remote != nil {
		return s.Remote
	}
	return s.Peer
}

// Servers are the clusters that run echo servers: Local, and Remote and Peer where set.
func (s ProbeSetup) Servers() []*Cluster {
	out := []*Cluster{s.Local}
	for _, c := range []*Cluster{s.Remote, s.Peer} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// AppsOf are the probe apps with an endpoint in c.
func (s ProbeSetup) AppsOf(c *Cluster) []string {
	var apps []string
	switch c {
	case s.Local:
		apps = []string{EchoLocal}
	case s.Remote:
		apps = []string{EchoRemote}
	case s.Peer:
		apps = []string{EchoPeer}
	}
	if c == s.Local || c == s.Failover() {
		apps = append(apps, EchoFailover)
	}
	return apps
}

// Probe applications.
const (
	EchoLocal    = "echo-local"    // endpoints in the client's cluster only
	EchoRemote   = "echo-remote"   // endpoints in the other network's cluster only
	EchoPeer     = "echo-peer"     // endpoints in the same network's other cluster only
	EchoFailover = "echo-failover" // endpoints in the client's cluster and in Failover(), PreferClose
)

// ProbeApps are every probe app, each a global service in every cluster.
var ProbeApps = []string{EchoLocal, EchoRemote, EchoPeer, EchoFailover}

// ProbeEnv drives traffic from the probe client and reports the path it took.
type ProbeEnv interface {
	// Ready waits until every deployed probe app answers through the mesh and the client's data
	// plane holds a healthy endpoint of echo-remote, echo-peer and echo-failover in the clusters
	// that serve them.
	Ready(ctx context.Context, timeout time.Duration) error
	// Load runs fortio from the probe client.
	Load(ctx context.Context, l Load) (*LoadResult, error)
	// Request sends one request to app through the mesh on a new connection and returns the
	// cluster whose endpoint served it.
	Request(ctx context.Context, app string) (servedBy string, err error)
	// SetReady makes app's endpoint in cluster ready or unready (a status write where the
	// provider owns pod status; a failing readiness probe or scale to zero elsewhere).
	SetReady(ctx context.Context, app, cluster string, ready bool) error
	// Path reads the counters that show which hops carried traffic.
	Path(ctx context.Context) (PathCounters, error)
	// Close stops what DeployProbes started.
	Close() error
}

// Load is one fortio run.
type Load struct {
	App string // a probe app; "" with Direct
	// Direct sends straight to echo-local's server, bypassing the mesh: the harness floor.
	Direct         bool
	NewConnections bool
	QPS            float64
	Duration       time.Duration
	Connections    int
	Payload        int
}

// LoadResult is what fortio measured.
type LoadResult struct {
	QPS             float64
	DurationSeconds float64
	Requests        int64
	OK              int64 // requests answered 200
	AvgSeconds      float64
	// Percentiles maps 50, 90, 99 to seconds.
	Percentiles map[float64]float64
	// Warmups is how many calls fortio made before the run (one per connection) that still
	// reached the server.
	Warmups int64
	// HostCPUBusy is the share of host CPU in use during the run, where the provider can read
	// it (absent: -1).
	HostCPUBusy float64
}

// PathCounters count what each hop carried; only differences between two reads mean anything.
type PathCounters struct {
	// Served counts what each endpoint served, by "cluster/app": requests, or connections where
	// ServedConnections says so (ztunnel's metrics count connections).
	Served            map[string]int64
	ServedConnections bool
	// GatewayTunnels counts tunnels each cluster's east-west gateway forwarded, by cluster.
	GatewayTunnels map[string]int64
	// Inbound counts connections the destination ztunnels accepted, by cluster; InboundViaGateway
	// those that came through a gateway.
	Inbound, InboundViaGateway map[string]int64
	// ClientHBONE and ClientDoubleHBONE count the client ztunnel's outbound tunnels.
	ClientHBONE, ClientDoubleHBONE int64
}

// FakeNodeLabel marks the framework's fake nodes in every provider.
const FakeNodeLabel = "ambientmc.io/fake-node"

// Optional capabilities. A provider, or where said a value it returns, offers each of these by
// implementing it, and only where it can (a provider whose capability depends on its flags returns
// a value that implements it, or one that does not); callers type-assert them and do without when
// absent (or skip, for tests that need one). This file is the whole list, and it is the one way a
// provider says what it can do once built: nothing outside it asks a provider for a method of its
// own, and no operation answers "unsupported". (Before a provider is built, the registry's
// topology.Capabilities say which topologies it builds; what a cluster runs is its Cluster.Runs.)

// ExtraIstiods is offered by control planes (ControlPlane values) that can run a second istiod for
// a cluster beside its own, for tests that must not disturb the suite's: the local provider's, and
// kind's and kube's when their Istio images are the ones make images builds (the second istiod
// runs on this host from the build the cluster runs).
type ExtraIstiods interface {
	// StartExtraIstiod starts istiod o.Name (not "") for c and waits until it is ready.
	StartExtraIstiod(ctx context.Context, c *Cluster, o IstiodOptions) (Istiod, error)
}

// IstiodBinary is offered by providers that run istiod as a pilot-discovery process on this host:
// -istiod.version or -istiod.binary choose it, the environment builds it into the binary cache
// (framework/bins) and StartIstiod gets it as IstiodOptions.Binary. The others run istiod images.
type IstiodBinary interface {
	// ClusterBinaries name what the clusters run besides pilot-discovery, from the same cache
	// (framework/bins names them).
	ClusterBinaries() []string
}

// IstiodImageBuild is offered by providers that run istiod images this machine built from a known
// istio.io/istio version (make images): the environment resolves that pilot-discovery build as
// for -istiod.version, so the report and the known-issue table name the istiod under test.
type IstiodImageBuild interface {
	// IstiodImageVersion is the module version, "" for images of unknown build.
	IstiodImageVersion() string
}

// IstiodRestarter is offered by istiods that can be restarted in place: stopped and started again
// with the same options and at the same addresses, so xDS clients and samplers reconnect to where
// they were (a fresh istiod for a measurement, or a restart under a running data plane). Done,
// ExitErr and the log follow the new process.
type IstiodRestarter interface {
	// Restart stops istiod and starts it again in place.
	Restart(ctx context.Context) error
}

// FakeNodeProxies is offered by providers that stand in for a ztunnel on each of the framework's
// fake nodes (local): every ambient pod there gets its certificate from istiod's CA as its node's
// ztunnel would ask for it (one per identity per node, renewed at half its lifetime), so istiod
// signs for every pod as in a mesh with a ztunnel on each node.
type FakeNodeProxies interface {
	// ServeFakeNodes starts a ztunnel's certificate client on each of nodes of c, asking i's CA
	// (ca is c's: its root is what i's serving certificate chains to), and keeps the certificates
	// of the pods on those nodes as pods come and go until Close.
	ServeFakeNodes(ctx context.Context, c *Cluster, i Istiod, ca CACerts, nodes []string) (NodeCertificates, error)
}

// NodeCertificates are what the fake nodes' certificate clients of one cluster hold.
type NodeCertificates interface {
	// Wait returns once every pod served now has its certificate.
	Wait(ctx context.Context) error
	// Counts says what they serve and what they asked for so far.
	Counts() NodeCertCounts
	// TTL is the lifetime they ask for (renewing at half of it).
	TTL() time.Duration
	Close() error
}

// NodeCertCounts count nodes, the pods served on them and the certificates held (one per identity
// per node); Issued counts certificates received (Renewed of them replaced an earlier one), Failed
// the requests istiod's CA refused or never answered.
type NodeCertCounts struct {
	Nodes, Pods, Certificates int
	Issued, Renewed, Failed   int64
}

// ClientRestarter is offered by probe environments (ProbeEnv) whose client can be given a fresh
// xDS stream.
type ClientRestarter interface {
	// RestartClient gives the probe client a fresh xDS stream and connection pool.
	RestartClient(ctx context.Context) error
}

// HopAccess is offered by probe environments (ProbeEnv) whose data plane hops the test process can
// dial itself (the local provider's loopback plan); security tests skip elsewhere.
type HopAccess interface {
	// Hops returns the addresses and identities of the other network's side of the probe path
	// and, where the provider reaches it, of the same network's peer
	// (zero when the topology has no other network).
	Hops() Hops
}

// Hops are the remote ztunnel and gateway of the probe path, and the peer's ztunnel on the
// client's network, as the test process reaches them (each zero where the topology or the provider
// has none).
type Hops struct {
	PeerZtunnel       netip.AddrPort // echo-peer's ztunnel HBONE listener, on the client's network
	PeerEchoAuthority string         // echo-peer's pod IP:port, the CONNECT authority at its ztunnel
	RemoteZtunnel     netip.AddrPort // echo-remote's ztunnel HBONE listener
	RemoteGateway     netip.AddrPort // the remote east-west gateway's HBONE listener
	EchoAuthority     string         // echo-remote's pod IP:port, the inner CONNECT authority at the ztunnel
	RemoteHost        string         // echo-remote's service hostname:port, the authority at the gateway
	GatewayID         string         // the gateway's SPIFFE identity
	EchoID            string         // echo-remote's SPIFFE identity
	ClientCA          CACerts
	Roots             *x509.CertPool
	ProbeNamespace    string
}

// Listeners is offered by providers whose every process the framework starts on this host, so a
// test can check that all of them listen on loopback only.
type Listeners interface {
	// Listening returns every listening socket of the run's processes and the test process.
	Listening() ([]netip.AddrPort, error)
}

// ImageLister is offered by providers that run Istio from images: what each component's pods
// actually run, as the cluster resolved it.
type ImageLister interface {
	// Images reads the image of every Istio component's pods in every cluster.
	Images(ctx context.Context) ([]Image, error)
}

// Image is one container image of an Istio component in one cluster.
type Image struct {
	Cluster   string
	Component string // e.g. istiod, ztunnel, istio-cni-node, istio-eastwestgateway
	Image     string // as the pod spec names it
	ImageID   string // the digest the node resolved (container status imageID)
}

// SetupPlanner is offered by providers that can say, before anything starts, how long Create and
// the CRDs will take for a topology, for the run's time plan (items named after the setup steps
// "clusters" and "crds", so the report can set what they took beside them).
type SetupPlanner interface {
	// PlanSetup estimates Create and the CRDs for t with podsPerCluster pods in each cluster.
	PlanSetup(t *topology.Topology, podsPerCluster int) []SetupEstimate
}

// SetupEstimate is how long one setup step is expected to take, and what the figure is made of.
type SetupEstimate struct {
	Step     string
	Expected time.Duration
	Detail   string
}

// CRDPreloader is offered by providers that can start clusters with the CRDs already stored (the
// local provider, from a seed an earlier run of the same build captured).
type CRDPreloader interface {
	// PreloadCRDs returns the CRDs to apply: the provider may store a lighter form of the same.
	PreloadCRDs(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
	// SeededCRDs says the CRDs were stored before the API servers started.
	SeededCRDs() bool
	// SaveCRDSeed captures c's established CRDs for later runs of clusters like c; a no-op
	// where this run stored them from a seed.
	SaveCRDSeed(ctx context.Context, c *Cluster) error
}

// WorkloadRestorer is offered by providers that can start clusters holding the scale workloads
// an earlier run of the same inputs wrote (the local provider keeps them as stored in etcd), so a
// large scale is written through the API once, not on every run.
type WorkloadRestorer interface {
	// PreloadWorkloads is told before Create what every cluster gets; clusters with a snapshot of
	// exactly that start holding it.
	PreloadWorkloads(w WorkloadSet) error
	// RestoredWorkloads says whether cluster name started holding its workloads, and from where.
	RestoredWorkloads(name string) (from string, ok bool)
	// SaveWorkloads captures c's workloads, written and published, for later runs.
	SaveWorkloads(ctx context.Context, c *Cluster) error
}

// WorkloadSet is what a WorkloadRestorer needs of the scale workloads: a key over everything that
// shapes them but the cluster, and the names of what they consist of.
type WorkloadSet struct {
	Key        string
	Pods       int
	Nodes      []string // cluster-scoped fake nodes (and their leases)
	Namespaces []string // every namespaced object of the workloads lives in one of these
}

// LogCollector is offered by providers whose clusters keep their logs outside the run directory
// (kind's node containers).
type LogCollector interface {
	// CollectLogs copies every cluster's logs into the run directory and returns where ("" when
	// there is no cluster).
	CollectLogs() string
}

// Keeper is offered by providers whose clusters outlive the test process (kind's containers). With
// -keep the framework asks it, before waiting for Ctrl-C, what a user needs to reach the kept
// clusters and to remove them later; its Destroy then leaves them.
type Keeper interface {
	// Keep puts the clusters' kubeconfigs (0600) where the run directory's removal does not reach
	// and says how to remove everything the run made. It is idempotent; an empty Kept.Dir means
	// nothing was made to keep.
	Keep() (Kept, error)
}

// Kept is what a Keeper leaves a user.
type Kept struct {
	// Dir holds the kubeconfigs and what the removal reads.
	Dir string
	// Clusters are the kept clusters with their kubeconfigs, in creation order.
	Clusters []KeptCluster
	// Remove is one command that removes everything the run made (clusters, networks) and puts
	// back what it changed on the host.
	Remove string
}

// KeptCluster is one kept cluster; Kubeconfig is "" where its create did not get that far.
type KeptCluster struct {
	Name, Kubeconfig string
}

// NodeImager is offered by providers whose clusters run on a node image (kind), for the report.
type NodeImager interface {
	// NodeImage is the image every cluster's node runs.
	NodeImage() string
}

// Platformer is offered by providers that install Istio with platform settings (kube), for the
// report.
type Platformer interface {
	// Platform is the Istio platform cluster is installed with and what chose it ("" when none).
	Platform(cluster string) (platform, from string)
}

// ProcessLister is offered by providers that run cluster components as processes on this host,
// for the report's RSS and CPU figures.
type ProcessLister interface {
	// Processes are the running processes of each cluster, by cluster name.
	Processes() map[string][]Process
}

// Process is one running process of a cluster on this host, as the report reads it.
type Process interface {
	Name() string
	Pid() int
	RSSBytes() (uint64, error)
	// RSSFileBytes is the part of RSS that is file pages (the binary's, shared between processes).
	RSSFileBytes() (uint64, error)
	CPUSeconds() (float64, error)
}

// SharedProcessLister is offered by providers that run processes serving every cluster (the local
// provider's one etcd): the report lists each once and gives every cluster its share.
type SharedProcessLister interface {
	// SharedProcesses are the running processes every cluster shares.
	SharedProcesses() []Process
	// DatabaseBytes is the shared etcd's database size.
	DatabaseBytes(ctx context.Context) (int64, error)
}

// WaveLister is offered by providers that start clusters in groups (local), for the report.
type WaveLister interface {
	// StartWaves are the groups of the last Create, in order.
	StartWaves() []StartWave
}

// ReadyNotifier is offered by providers that make clusters ready a few at a time (local), so the
// work a setup step does in each cluster can start on the first while later ones start.
type ReadyNotifier interface {
	// OnReady sets, before Create, what Create calls with each cluster as soon as it is ready. It
	// is called from Create's goroutines and must return at once.
	OnReady(fn func(*Cluster))
}

// StartWave is one group of clusters that started together: when it began and when its last
// cluster was ready, counted from the start of Create's first wave.
type StartWave struct {
	Clusters       []string
	Start, Ready   time.Duration
	ClusterSeconds []float64 // each cluster's own start-to-ready seconds, in Clusters order
}

// WatchedOnlyCutter is a provider that builds the clusters an istiod only watches lighter
// (provider.Env.IstiodClusters).
type WatchedOnlyCutter interface {
	// WatchedOnlyCuts lists what it leaves out of them, for the report's setup section.
	WatchedOnlyCuts() []string
}
