// Package hostdataplane runs the emulated data plane in the test process, on this host's
// loopback, for providers whose clusters have no nodes to run it on (local): a ztunnel per probe
// node and an east-west gateway per cluster (emulator/dataplane), echo servers on the probe pods'
// IPs, fortio in process; and a ztunnel's certificate client on each fake node. It is what
// probe.Deployer and cluster.FakeNodeProxies are on such a provider, as hostistiod is its istiod.
package hostdataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"fortio.org/fortio/fhttp"
	fortiolog "fortio.org/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ambientmc/ambientmc/emulator/dataplane"
	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"
	"github.com/ambientmc/ambientmc/emulator/dataplane/nodecerts"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/measure"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/pki"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/probeapp"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// Env is the emulated data plane with its probe workloads: a client in the local cluster,
// echo servers (in the test process, on their pod IPs) in the local and the remote cluster, the
// ztunnels of their nodes and the clusters' east-west gateways.
type Env struct {
	setup    probe.Setup
	certTTL  time.Duration // asked of istiod for the emulator's certificates (0: ztunnel's default)
	rootFile string        // the mesh root, as a pod mounts it, which istiod's serving certificate chains to
	probes   *workload.Probes
	echoes   map[string]*probeapp.Echo // "cluster/app"
	serverZ  map[string]*dataplane.Ztunnel
	gateways map[string]*dataplane.Gateway
	vips     map[string]netip.Addr // app -> ClusterIP in the local cluster

	mu      sync.Mutex
	clientZ *dataplane.Ztunnel
}

var (
	_ probe.Env             = (*Env)(nil)
	_ probe.HopAccess       = (*Env)(nil)
	_ probe.ClientRestarter = (*Env)(nil)
)

// Deploy creates the probe pods (status written by the framework) and starts the emulated
// ztunnels, gateways and echo servers that carry their traffic; certTTL is the lifetime their
// certificates are asked for (0: ztunnel's default).
func Deploy(ctx context.Context, s probe.Setup, certTTL time.Duration) (_ *Env, err error) {
	for _, c := range s.Servers() {
		if s.Istiods[c.Name] == nil {
			return nil, fmt.Errorf("the emulated data plane of %s needs its istiod", c.Name)
		}
	}
	e := &Env{setup: s, certTTL: certTTL, echoes: map[string]*probeapp.Echo{}, serverZ: map[string]*dataplane.Ztunnel{},
		gateways: map[string]*dataplane.Gateway{}, vips: map[string]netip.Addr{}}
	if e.rootFile, err = writeRoot(s.Dir, s.CAs[s.Local.Name]); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	if e.probes, err = workload.DeployProbes(ctx, s); err != nil {
		return nil, err
	}
	for _, srv := range e.probes.Servers {
		echo, err := probeapp.ServeEcho(srv.IP, srv.Cluster.Name)
		if err != nil {
			return nil, fmt.Errorf("echo server %s/%s: %w", srv.Cluster.Name, srv.Name, err)
		}
		e.echoes[srv.Cluster.Name+"/"+srv.App] = echo
	}
	for _, app := range probe.Apps {
		svc, err := s.Local.Client.CoreV1().Services(workload.ProbeNamespace).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		e.vips[app] = netip.MustParseAddr(svc.Spec.ClusterIP)
	}
	if e.clientZ, err = e.startZtunnel(ctx, s.Local, workload.ProbeClientNode, e.probes.Client.IP); err != nil {
		return nil, err
	}
	for _, c := range s.Servers() {
		if e.serverZ[c.Name], err = e.startZtunnel(ctx, c, workload.ProbeServerNode, netip.Addr{}); err != nil {
			return nil, err
		}
		gw, _ := topology.GatewayIP(c.Index)
		n, err := e.node(ctx, c, "eastwest", mesh.EastWestGateway)
		if err != nil {
			return nil, err
		}
		if e.gateways[c.Name], err = dataplane.StartGateway(ctx, n, gw); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// writeRoot writes the mesh root into dir, as a pod mounts istio-ca-root-cert.
func writeRoot(dir string, ca cluster.CACerts) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f := filepath.Join(dir, pki.RootCertFile)
	return f, os.WriteFile(f, ca.RootPEM, 0o644)
}

// startZtunnel starts the ztunnel of node name in cluster c, capturing source's traffic.
func (e *Env) startZtunnel(ctx context.Context, c *cluster.Cluster, name string, source netip.Addr) (*dataplane.Ztunnel, error) {
	n, err := e.node(ctx, c, name, nodecerts.ZtunnelAccount)
	if err != nil {
		return nil, err
	}
	return dataplane.StartZtunnel(ctx, n, source)
}

// node describes an emulated component on a node of cluster c that runs as service account sa
// of istio-system: a ztunnel's pod is bound to its node (istiod signs for the pods there), the
// gateway's token to no pod (it asks for its own identity only).
func (e *Env) node(ctx context.Context, c *cluster.Cluster, name, sa string) (dataplane.Node, error) {
	ip, _ := workload.ProbeNodeIP(c, name)
	on := name
	if name == "eastwest" {
		ip, _ = topology.GatewayIP(c.Index)
		on = ""
	}
	istiod := e.setup.Istiods[c.Name]
	certs, err := nodecerts.Start(ctx, nodecerts.Config{Client: c.Client, Cluster: c.Name, Node: on, ServiceAccount: sa,
		CAAddress: istiod.XDSAddress(), RootFile: e.rootFile, TTL: e.certTTL, Logf: e.setup.Logf})
	if err != nil {
		return dataplane.Node{}, err
	}
	return dataplane.Node{
		Cluster: c.Name, Network: c.Network, Name: name, IP: ip,
		XDSAddress: istiod.XDSAddress(), Certs: certs, Roots: e.setup.Roots,
		Dir: filepath.Join(e.setup.Dir, c.Name), Logf: e.setup.Logf,
	}, nil
}

func (e *Env) client() *dataplane.Ztunnel {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.clientZ
}

// URL is what the client calls for app: its ClusterIP, captured by the client node's ztunnel.
func (e *Env) URL(app string) string {
	return fmt.Sprintf("http://%s:%d/echo", e.vips[app], workload.ProbePort)
}

// Ready waits until traffic flows to every app and the client's view has the remote endpoints.
func (e *Env) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, c := range e.setup.Servers() {
		for _, app := range e.setup.AppsOf(c) {
			if err := waitServing(ctx, e.URL(app)); err != nil {
				return fmt.Errorf("dataplane: %s never answered through the mesh: %w; the client ztunnel's last outbound error: %q; its view of %s: %s; %s",
					app, err, e.client().LastError(), app, e.viewOf(app), e.istiodOf(app))
			}
			if c == e.setup.Local {
				continue
			}
			for !e.holds(app, c) {
				select {
				case <-ctx.Done():
					return fmt.Errorf("dataplane: the client ztunnel's view has no healthy endpoint of %s in %s within %s; its view: %s; %s",
						app, c.Name, timeout, e.viewOf(app), e.istiodOf(app))
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// RestartClient gives the client ztunnel a fresh xDS stream and connection pool.
func (e *Env) RestartClient(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clientZ.Close()
	z, err := e.startZtunnel(ctx, e.setup.Local, workload.ProbeClientNode, e.probes.Client.IP)
	if err != nil {
		return err
	}
	e.clientZ = z
	return nil
}

// viewOf says what the client's xDS view holds of app's service, for a failure's message: a
// missing service, or each endpoint's cluster, network and health.
func (e *Env) viewOf(app string) string {
	v := e.client().View()
	if v == nil {
		return "no view yet (no answer from istiod)"
	}
	svc := v.ServiceByVIP(e.setup.Local.Network, e.vips[app], workload.ProbeNamespace)
	if svc == nil {
		return fmt.Sprintf("no service at %s among %d services", e.vips[app], len(v.Services()))
	}
	var parts []string
	for _, ep := range v.Endpoints(svc) {
		parts = append(parts, fmt.Sprintf("%s in %s/%s healthy=%t", ep.UID, ep.Cluster, ep.Network, ep.Healthy))
	}
	if len(parts) == 0 {
		parts = []string{"the service with no endpoint"}
	}
	for _, srv := range e.probes.Servers {
		if srv.App != app || srv.Cluster.Network != e.setup.Local.Network {
			continue // a pod on another network is reached through its gateway, not by address
		}
		if w := v.WorkloadByAddr(srv.IP); w != nil {
			parts = append(parts, fmt.Sprintf("the pod's address %s held by %s in %s/%s healthy=%t serving %d services",
				srv.IP, w.UID, w.Cluster, w.Network, w.Healthy, w.InServices))
		} else {
			parts = append(parts, fmt.Sprintf("no workload at the pod's address %s (%s)", srv.IP, srv.Cluster.Name))
		}
	}
	return strings.Join(parts, "; ") + " (" + v.WorkloadsPerCluster() + ")"
}

// istiodOf says what the client's istiod holds of app's service (/debug/ambientz, kept in the
// run directory): whether a missing endpoint is istiod's or the client's.
func (e *Env) istiodOf(app string) string {
	i := e.setup.Istiods[e.setup.Local.Name]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dump, err := mesh.SamplerOf(i.Endpoints()).Ambientz(ctx)
	if err != nil {
		return "istiod's index not read: " + err.Error()
	}
	file := filepath.Join(e.setup.Dir, e.setup.Local.Name, "ambientz-"+time.Now().UTC().Format("150405.000")+".json")
	kept := "kept in " + file
	if err := os.WriteFile(file, dump.Raw, 0o644); err != nil {
		kept = "not kept: " + err.Error()
	}
	key := workload.ProbeNamespace + "/" + workload.ProbeHost(app)
	return fmt.Sprintf("istiod %s %s (%s)", i.Cluster(), dump.Of(key), kept)
}

// holds says whether the client ztunnel holds a healthy endpoint of app in cluster c: the pod's
// own workload on the client's network, a split-horizon one via the gateway on another.
func (e *Env) holds(app string, c *cluster.Cluster) bool {
	v := e.client().View()
	if v == nil {
		return false
	}
	svc := v.ServiceByVIP(e.setup.Local.Network, e.vips[app], workload.ProbeNamespace)
	if svc == nil {
		return false
	}
	for _, ep := range v.Endpoints(svc) {
		if ep.Cluster == c.Name && ep.Network == c.Network && ep.Healthy {
			return true
		}
	}
	return false
}

// Load runs fortio in the test process, through the client ztunnel (or straight at echo-local).
func (e *Env) Load(ctx context.Context, l probe.Load) (*probe.LoadResult, error) {
	url := e.URL(l.App)
	if l.Direct {
		srv, ok := e.probes.Server(probe.EchoLocal, e.setup.Local.Name)
		if !ok {
			return nil, errors.New("no echo-local server")
		}
		// The floor dials the server's socket itself: the pod address's loopback twin.
		sock, err := addrmap.Socket(srv.IP)
		if err != nil {
			return nil, err
		}
		url = "http://" + net.JoinHostPort(sock.String(), strconv.Itoa(workload.EchoPort)) + "/echo"
	}
	fortiolog.SetLogLevelQuiet(fortiolog.Error)
	o := probeapp.FortioOptions(url+"?size="+strconv.Itoa(l.Payload), l)
	o.Out = io.Discard
	before, err := measure.ReadHostCPU()
	if err != nil {
		return nil, err
	}
	// A cut-short run ends the load at once.
	stop := context.AfterFunc(ctx, o.Abort)
	res, err := fhttp.RunHTTPTest(o)
	stop()
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	after, err := measure.ReadHostCPU()
	if err != nil {
		return nil, err
	}
	r := probeapp.FortioResult(res, l.Connections)
	r.HostCPUBusy = after.BusySince(before)
	return r, nil
}

// Request calls app once on a new connection and reads which cluster served it.
func (e *Env) Request(ctx context.Context, app string) (string, error) {
	return requestServedBy(ctx, e.URL(app))
}

var oneShot = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

func requestServedBy(ctx context.Context, url string) (string, error) {
	return probeapp.FetchServedBy(ctx, oneShot, url)
}

// waitServing polls url until it answers 200.
func waitServing(ctx context.Context, url string) error {
	var last error
	for {
		if _, err := requestServedBy(ctx, url); err == nil {
			return nil
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// SetReady writes the readiness of app's pod in cluster, as a kubelet would.
func (e *Env) SetReady(ctx context.Context, app, clusterName string, ready bool) error {
	pod, ok := e.probes.Server(app, clusterName)
	if !ok {
		return fmt.Errorf("no %s pod in %s", app, clusterName)
	}
	return workload.SetReady(ctx, pod, ready)
}

// Path reads the emulators' counters.
func (e *Env) Path(context.Context) (probe.PathCounters, error) {
	pc := probe.PathCounters{Served: map[string]int64{}, GatewayTunnels: map[string]int64{},
		Inbound: map[string]int64{}, InboundViaGateway: map[string]int64{}}
	for k, echo := range e.echoes {
		pc.Served[k] = echo.Requests.Load()
	}
	for c, g := range e.gateways {
		pc.GatewayTunnels[c] = g.Forwarded.Load()
	}
	for c, z := range e.serverZ {
		pc.Inbound[c] = z.Stats.Inbound.Load()
		pc.InboundViaGateway[c] = z.Stats.InboundViaGateway.Load()
	}
	z := e.client()
	pc.ClientHBONE, pc.ClientDoubleHBONE = z.Stats.OutboundHBONE.Load(), z.Stats.OutboundDoubleHBONE.Load()
	return pc, nil
}

// Hops: on loopback, the test process can dial the remote ztunnel and gateway and the peer's
// ztunnel itself (a ztunnel at the loopback twin of the pod address it serves).
func (e *Env) Hops() probe.Hops {
	h := probe.Hops{
		EchoID:         "spiffe://cluster.local/ns/" + workload.ProbeNamespace + "/sa/echo",
		ClientCA:       e.setup.CAs[e.setup.Local.Name],
		Roots:          e.setup.Roots,
		ProbeNamespace: workload.ProbeNamespace,
	}
	if e.setup.Peer != nil {
		echo, _ := e.probes.Server(probe.EchoPeer, e.setup.Peer.Name)
		sock, _ := addrmap.Socket(echo.IP)
		h.PeerZtunnel = netip.AddrPortFrom(sock, dataplane.HBONEPort)
		h.PeerEchoAuthority = net.JoinHostPort(echo.IP.String(), strconv.Itoa(workload.EchoPort))
	}
	if e.setup.Remote == nil {
		return h // no other network: no gateway on the probe path
	}
	echo, _ := e.probes.Server(probe.EchoRemote, e.setup.Remote.Name)
	gw, _ := topology.GatewayIP(e.setup.Remote.Index)
	sock, _ := addrmap.Socket(echo.IP)
	h.RemoteZtunnel = netip.AddrPortFrom(sock, dataplane.HBONEPort)
	h.RemoteGateway = netip.AddrPortFrom(gw, dataplane.HBONEPort)
	h.EchoAuthority = net.JoinHostPort(echo.IP.String(), strconv.Itoa(workload.EchoPort))
	h.RemoteHost = net.JoinHostPort(workload.ProbeHost(probe.EchoRemote), strconv.Itoa(workload.ProbePort))
	h.GatewayID = dataplane.GatewayIdentity
	return h
}

// Close stops the emulators and echo servers.
func (e *Env) Close() error {
	for _, z := range e.serverZ {
		z.Close()
	}
	if z := e.client(); z != nil {
		z.Close()
	}
	for _, g := range e.gateways {
		g.Close()
	}
	for _, echo := range e.echoes {
		_ = echo.Close()
	}
	return nil
}

// ServeFakeNodes stands in for the ztunnel of each of c's fake nodes: a certificate client per
// node (emulator/dataplane/nodecerts) that asks i's CA for the pods on its node, for certificates
// of ttl (0: ztunnel's default); dir holds the mesh root they trust.
func ServeFakeNodes(ctx context.Context, c *cluster.Cluster, i cluster.Istiod, ca cluster.CACerts, nodes []string, dir string, ttl time.Duration, log io.Writer) (cluster.NodeCertificates, error) {
	root, err := writeRoot(dir, ca)
	if err != nil {
		return nil, err
	}
	n, err := nodecerts.ServeNodes(ctx, nodecerts.Config{Client: c.Client, Cluster: c.Name, CAAddress: i.XDSAddress(), RootFile: root,
		TTL: ttl, Logf: func(format string, args ...any) { fmt.Fprintf(log, format+"\n", args...) }}, nodes)
	if err != nil {
		return nil, err
	}
	return fakeNodes{n, ttl}, nil
}

// fakeNodes are nodecerts.Nodes as the contract counts them.
type fakeNodes struct {
	*nodecerts.Nodes
	ttl time.Duration
}

func (f fakeNodes) TTL() time.Duration {
	if f.ttl == 0 {
		return nodecerts.DefaultTTL
	}
	return f.ttl
}

func (f fakeNodes) Counts() cluster.NodeCertCounts {
	c := f.Nodes.Counts()
	return cluster.NodeCertCounts{Nodes: c.Nodes, Pods: c.Pods, Certificates: c.Identities, Issued: c.Issued, Renewed: c.Renewed, Failed: c.Failed}
}

// Server is the probe server of app in cluster.
func (e *Env) Server(app, cluster string) (workload.ProbePod, bool) {
	return e.probes.Server(app, cluster)
}
