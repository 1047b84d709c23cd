// Package probe is the data-plane suites' vocabulary: the probe workloads (a client, and echo
// servers on the client's cluster, another network and the client's own), the traffic they carry
// and the counters that show its path. Providers that run a data plane implement Deployer; the
// contract (framework/cluster) knows nothing of probes.
package probe

import (
	"context"
	"crypto/x509"
	"net/netip"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// Deployer is implemented by providers that run a data plane (their Facts().DataPlane is not "none"): it
// deploys the probe workloads that carry the data-plane suites' traffic.
type Deployer interface {
	// DeployProbes creates the probe services in every cluster, the client and echo-local in
	// s.Local, echo-remote in s.Remote, echo-peer in s.Peer and echo-failover in s.Local and
	// s.Failover(), and starts whatever carries their traffic.
	DeployProbes(ctx context.Context, s Setup) (Env, error)
}

// Setup is what a provider needs to deploy the probes.
type Setup struct {
	Clusters []*cluster.Cluster
	// Local is the client's cluster. Remote is a cluster on another network (nil when every
	// cluster shares the client's), reached through its east-west gateway; Peer another cluster
	// on the client's own network (nil when it has none), reached directly.
	Local, Remote, Peer *cluster.Cluster
	Istiods             map[string]cluster.Istiod // by cluster
	CAs                 map[string]cluster.CACerts
	Roots               *x509.CertPool
	Dir                 string
	Logf                func(format string, args ...any)
}

// ChooseServers sets Remote and Peer: the first primary of Clusters on another network, and the
// first on the client's own, of those running an istiod.
func (s *Setup) ChooseServers(runsIstiod func(*cluster.Cluster) bool) {
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
func (s Setup) Failover() *cluster.Cluster {
	if s.Remote != nil {
		return s.Remote
	}
	return s.Peer
}

// Servers are the clusters that run echo servers: Local, and Remote and Peer where set.
func (s Setup) Servers() []*cluster.Cluster {
	out := []*cluster.Cluster{s.Local}
	for _, c := range []*cluster.Cluster{s.Remote, s.Peer} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// AppsOf are the probe apps with an endpoint in c.
func (s Setup) AppsOf(c *cluster.Cluster) []string {
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

// Apps are every probe app, each a global service in every cluster.
var Apps = []string{EchoLocal, EchoRemote, EchoPeer, EchoFailover}

// Env drives traffic from the probe client and reports the path it took.
type Env interface {
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

// ClientRestarter is offered by probe environments (Env) whose client can be given a fresh
// xDS stream.
type ClientRestarter interface {
	// RestartClient gives the probe client a fresh xDS stream and connection pool.
	RestartClient(ctx context.Context) error
}

// HopAccess is offered by probe environments (Env) whose data plane hops the test process can
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
	ClientCA          cluster.CACerts
	Roots             *x509.CertPool
	ProbeNamespace    string
}
