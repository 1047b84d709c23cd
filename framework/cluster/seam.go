package cluster

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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

// FakeNodeLabel marks the framework's fake nodes in every provider.
const FakeNodeLabel = "ambientmc.io/fake-node"

// Optional capabilities. A provider, or where said a value it returns, offers each of these by
// implementing it, and only where it can (a provider whose capability depends on its flags returns
// a value that implements it, or one that does not); callers type-assert them and do without when
// absent (or skip, for tests that need one). Together with Facts (facts.go), which only describe a
// run, this file is the whole list: nothing outside it asks a provider for a method of its own,
// and no operation answers "unsupported". (Before a provider is built, the registry's
// topology.Capabilities say which topologies it builds; what a cluster runs is its Cluster.Runs.
// The data plane's probes are framework/probe's, not the contract's.)

// ExtraIstiods is offered by control planes (ControlPlane values) that can run a second istiod for
// a cluster beside its own, for tests that must not disturb the suite's: the local provider's, and
// kind's and kube's when their Istio images are the ones make images builds (the second istiod
// runs on this host from the build the cluster runs).
type ExtraIstiods interface {
	// StartExtraIstiod starts istiod o.Name (not "") for c and waits until it is ready.
	StartExtraIstiod(ctx context.Context, c *Cluster, o IstiodOptions) (Istiod, error)
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

// Snapshots is offered by providers that can start clusters holding what an earlier run of the
// same inputs stored (the local provider keeps it as stored in etcd): the CRDs, from a seed an
// earlier run of the same build captured, and the scale workloads, so a large scale is written
// through the API once, not on every run.
type Snapshots interface {
	// PreloadCRDs returns the CRDs to apply: the provider may store a lighter form of the same.
	PreloadCRDs(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)
	// SeededCRDs says the CRDs were stored before the API servers started.
	SeededCRDs() bool
	// SaveCRDSeed captures c's established CRDs for later runs of clusters like c; a no-op
	// where this run stored them from a seed.
	SaveCRDSeed(ctx context.Context, c *Cluster) error

	// PreloadWorkloads is told before Create what every cluster gets; clusters with a snapshot of
	// exactly that start holding it.
	PreloadWorkloads(w WorkloadSet) error
	// RestoredWorkloads says whether cluster name started holding its workloads, and from where.
	RestoredWorkloads(name string) (from string, ok bool)
	// SaveWorkloads captures c's workloads, written and published, for later runs.
	SaveWorkloads(ctx context.Context, c *Cluster) error
}

// WorkloadSet is what Snapshots needs of the scale workloads: a key over everything that shapes
// them but the cluster, and the names of what they consist of.
type WorkloadSet struct {
	Key        string
	Pods       int
	Nodes      []string // cluster-scoped fake nodes (and their leases)
	Namespaces []string // every namespaced object of the workloads lives in one of these
}

// Keeper is offered by providers whose clusters live outside the test process and the run
// directory (kind's containers): their logs are copied in for failure messages, and with -keep
// the framework asks, before waiting for Ctrl-C, what a user needs to reach the kept clusters and
// to remove them later; Destroy then leaves them.
type Keeper interface {
	// CollectLogs copies every cluster's logs into the run directory and returns where ("" when
	// there is no cluster).
	CollectLogs() string
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

// HostProcesses is offered by providers that run cluster components as processes on this host,
// for the report's RSS and CPU figures.
type HostProcesses interface {
	// SampleProcesses reads every running process of each cluster, and those every cluster shares
	// (the local provider's one etcd: the report lists each once and gives every cluster its
	// share).
	SampleProcesses(ctx context.Context) ProcessSamples
}

// ProcessSamples are the host's cluster processes as read at one moment.
type ProcessSamples struct {
	// ByCluster are each cluster's own processes, by cluster name.
	ByCluster map[string][]ProcessSample
	// Shared serve every cluster.
	Shared []ProcessSample
}

// ProcessSample is one process as read: a figure that could not be read is absent (nil).
type ProcessSample struct {
	Name     string
	RSSBytes *uint64
	// RSSFileBytes is the part of RSS that is file pages (the binary's, shared between processes).
	RSSFileBytes *uint64
	CPUSeconds   *float64
	// DatabaseBytes is a shared etcd's database size.
	DatabaseBytes *int64
}
