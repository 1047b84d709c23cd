package xdswatch

import (
	"context"
	"crypto/tls"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/pki"
)

// fakeIstiod is an in-process delta ADS server on 127.0.0.1 that serves workloadapi Address
// resources the way istiod does (wildcard delta, resources named by UID) over mTLS. Its serving
// certificate is the cluster intermediate, which carries istiod's DNS name as the plugged-in CA
// does, so the watcher verifies it exactly as it verifies istiod.
type fakeIstiod struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	addr    string
	server  *grpc.Server
	initial []*workloadapi.Address

	mu       sync.Mutex
	node     *core.Node
	peerID   string
	types    []string // type URLs subscribed, in order
	push     chan *discovery.DeltaDiscoveryResponse
	nacks    []string // error details of rejected responses
	acked    []string // nonces of accepted responses
	nonceSeq int
}

func startFakeIstiod(t *testing.T, inter *pki.Intermediate, roots *pki.Root, initial ...*workloadapi.Address) *fakeIstiod {
	t.Helper()
	return startFakeIstiodAt(t, "127.0.0.1:0", inter, roots, initial...)
}

// startFakeIstiodAt listens on addr (a restarted istiod comes back on its old port).
func startFakeIstiodAt(t *testing.T, addr string, inter *pki.Intermediate, roots *pki.Root, initial ...*workloadapi.Address) *fakeIstiod {
	t.Helper()
	cert, err := tls.X509KeyPair(inter.ChainPEM, inter.KeyPEM)
	require.NoError(t, err)
	cfg := &tls.Config{
		MinVersion:            tls.VersionTLS12,
		Certificates:          []tls.Certificate{cert},
		ClientAuth:            tls.RequireAnyClientCert,
		VerifyPeerCertificate: pki.VerifySPIFFE(roots.Pool()),
	}
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	f := &fakeIstiod{addr: l.Addr().String(), initial: initial,
		push: make(chan *discovery.DeltaDiscoveryResponse, 16)}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	f.server = s
	discovery.RegisterAggregatedDiscoveryServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return f
}

func (f *fakeIstiod) response(typeURL string, add []*workloadapi.Address, remove ...string) *discovery.DeltaDiscoveryResponse {
	f.mu.Lock()
	f.nonceSeq++
	nonce := strconv.Itoa(f.nonceSeq)
	f.mu.Unlock()
	r := &discovery.DeltaDiscoveryResponse{TypeUrl: typeURL, Nonce: nonce, SystemVersionInfo: nonce, RemovedResources: remove}
	for _, a := range add {
		any, err := anypb.New(a)
		if err != nil {
			panic(err)
		}
		r.Resources = append(r.Resources, &discovery.Resource{Name: addressName(a), Version: nonce, Resource: any})
	}
	return r
}

// DeltaAggregatedResources answers each new subscription with the whole index (istiod's
// GenerateDeltas does so for a wildcard) and forwards pushes; one goroutine sends, as gRPC needs.
func (f *fakeIstiod) DeltaAggregatedResources(s discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	if p, ok := peer.FromContext(s.Context()); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			id, err := pki.PeerID(ti.State)
			if err == nil {
				f.mu.Lock()
				f.peerID = id
				f.mu.Unlock()
			}
		}
	}
	reqs := make(chan *discovery.DeltaDiscoveryRequest)
	errc := make(chan error, 1)
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				errc <- err
				return
			}
			reqs <- r
		}
	}()
	for {
		select {
		case err := <-errc:
			return err
		case r := <-reqs:
			if r.GetResponseNonce() != "" {
				f.mu.Lock()
				if r.GetErrorDetail() != nil {
					f.nacks = append(f.nacks, r.GetErrorDetail().GetMessage())
				} else {
					f.acked = append(f.acked, r.GetResponseNonce())
				}
				f.mu.Unlock()
				continue
			}
			f.mu.Lock()
			if f.node == nil {
				f.node = r.GetNode() // metadata comes with the first request only, as from ztunnel
			}
			f.types = append(f.types, r.GetTypeUrl())
			f.mu.Unlock()
			var add []*workloadapi.Address
			if r.GetTypeUrl() == v3.AddressType {
				add = f.initial
			}
			if err := s.Send(f.response(r.GetTypeUrl(), add)); err != nil {
				return err
			}
		case resp := <-f.push:
			if err := s.Send(resp); err != nil {
				return err
			}
		}
	}
}

// addressName is istiod's resource name: a workload's UID, a service's ns/hostname.
func addressName(a *workloadapi.Address) string {
	if w := a.GetWorkload(); w != nil {
		return w.GetUid()
	}
	return a.GetService().GetNamespace() + "/" + a.GetService().GetHostname()
}

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

// localPod is a workload of the watcher's own network, sent one by one.
func localPod(name string, svc string) *workloadapi.Address {
	return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
		Uid: "cluster-1//Pod/probe/" + name, Name: name, Namespace: "probe", Network: "network-1", ClusterId: "cluster-1",
		Addresses: [][]byte{ip("127.11.0.5")}, TunnelProtocol: workloadapi.TunnelProtocol_HBONE,
		Services: map[string]*workloadapi.PortList{svc: {Ports: []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}}}},
	}}}
}

// splitHorizon is what istiod sends for a global service's endpoints on another network
// (createSplitHorizonWorkload): no addresses, the remote gateway, the endpoint count as capacity.
func splitHorizon(network, gw, svc string, capacity uint32) *workloadapi.Address {
	return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
		Uid:            network + "/SplitHorizonWorkload/istio-system/istio-eastwestgateway/" + gw + "/" + svc,
		Network:        network,
		TunnelProtocol: workloadapi.TunnelProtocol_HBONE,
		NetworkGateway: &workloadapi.GatewayAddress{
			Destination:   &workloadapi.GatewayAddress_Address{Address: &workloadapi.NetworkAddress{Network: network, Address: ip(gw)}},
			HboneMtlsPort: 15008,
		},
		Capacity: wrapperspb.UInt32(capacity),
		Services: map[string]*workloadapi.PortList{svc: {Ports: []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}}}},
	}}}
}

func service(ns, host string) *workloadapi.Address {
	return &workloadapi.Address{Type: &workloadapi.Address_Service{Service: &workloadapi.Service{
		Name: host, Namespace: ns, Hostname: host + "." + ns + ".svc.cluster.local",
		Addresses: []*workloadapi.NetworkAddress{{Network: "network-1", Address: ip("127.101.0.10")}},
	}}}
}

type testCA struct {
	root  *pki.Root
	inter *pki.Intermediate
	dir   string
}

// newCA makes a root, the cluster's intermediate and a ztunnel identity in a CertDir.
func newCA(t *testing.T) testCA {
	t.Helper()
	root, err := pki.NewRoot()
	require.NoError(t, err)
	inter, err := root.NewIntermediate("cluster-1")
	require.NoError(t, err)
	zt, err := inter.Issue(pki.IstioNamespace, "ztunnel", time.Hour)
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, zt.WriteDir(dir))
	return testCA{root: root, inter: inter, dir: dir}
}

func start(t *testing.T, f *fakeIstiod, c testCA) *Watcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := Start(ctx, Config{Address: f.addr, CertDir: c.dir, IP: "127.11.0.200", Name: "ztunnel-node1",
		Node: "node-1", Cluster: "cluster-1"}, 15*time.Second)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return w
}

func waitFor(t *testing.T, w *Watcher, what string, cond func(*Watcher) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.WaitFor(ctx, cond), what)
}

const svcA, svcB = "probe/echo-remote.probe.svc.cluster.local", "probe/echo-failover.probe.svc.cluster.local"

// The watcher connects as a ztunnel does and holds what the server sent.
func TestWatcherSubscribesLikeZtunnel(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, c.inter, c.root, localPod("client-0", svcA), service("probe", "echo-remote"))
	w := start(t, f, c)

	f.mu.Lock()
	node, types, id := f.node, append([]string(nil), f.types...), f.peerID
	f.mu.Unlock()
	require.NotNil(t, node)
	assert.Equal(t, "ztunnel~127.11.0.200~ztunnel-node1.istio-system~istio-system.svc.cluster.local", node.GetId())
	md := node.GetMetadata().GetFields()
	assert.Equal(t, "cluster-1", md["CLUSTER_ID"].GetStringValue())
	assert.Equal(t, "node-1", md["NODE_NAME"].GetStringValue())
	assert.Equal(t, "istio-system", md["NAMESPACE"].GetStringValue())
	assert.ElementsMatch(t, []string{v3.AddressType, v3.WorkloadAuthorizationType}, types, "ztunnel watches exactly Address and Authorization")
	assert.Equal(t, pki.SPIFFEID(pki.IstioNamespace, "ztunnel"), id, "client certificate authentication")

	got := w.Addresses()
	require.Len(t, got, 2)
	assert.Equal(t, "client-0", got["cluster-1//Pod/probe/client-0"].GetWorkload().GetName())
	counts := w.Counts()
	assert.Equal(t, int64(1), counts["wds"].Pushes, "the initial answer, counted")
	assert.Equal(t, int64(2), counts["wds"].Resources)
	assert.Positive(t, counts["wds"].Bytes)
	assert.Equal(t, int64(1), counts["wads"].Pushes)
	assert.Equal(t, "echo-remote", got["probe/echo-remote.probe.svc.cluster.local"].GetService().GetName())
}

// A load client watches and acknowledges as a ztunnel does, and keeps nothing of what it is sent.
func TestLoadClientAcknowledgesAndHoldsNothing(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, c.inter, c.root, localPod("client-0", svcA), service("probe", "echo-remote"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := Start(ctx, Config{Address: f.addr, CertDir: c.dir, IP: "127.11.0.200", Name: "ztunnel-node1",
		Node: "node-1", Cluster: "cluster-1", HoldNothing: true}, 15*time.Second)
	require.NoError(t, err, "the initial answer counts as synced though nothing is kept")
	t.Cleanup(w.Close)
	seen := 0
	_, unsubscribe := w.Subscribe(func(Update) { seen++ })
	defer unsubscribe()

	push := f.response(v3.AddressType, []*workloadapi.Address{splitHorizon("network-2", "127.202.0.1", svcB, 4)})
	f.push <- push
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Contains(f.acked, push.GetNonce())
	}, 10*time.Second, 20*time.Millisecond, "the push was acknowledged")
	f.mu.Lock()
	assert.ElementsMatch(t, []string{v3.AddressType, v3.WorkloadAuthorizationType}, f.types, "it watches what ztunnel watches")
	assert.Empty(t, f.nacks)
	f.mu.Unlock()
	assert.Empty(t, w.Addresses(), "it holds nothing")
	w.mu.Lock()
	assert.Zero(t, seen, "it reports no update")
	w.mu.Unlock()
}

// Adds, removals and the split-horizon aggregation per network, as pushes arrive.
func TestWatcherTracksSplitHorizonWorkloads(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, c.inter, c.root,
		localPod("echo-0", svcA),
		splitHorizon("network-2", "127.202.0.1", svcA, 3),
		splitHorizon("network-3", "127.203.0.1", svcA, 5))
	w := start(t, f, c)

	sh := w.SplitHorizonFor("network-2")
	assert.Equal(t, 1, sh.Workloads)
	assert.Equal(t, uint64(3), sh.Capacity)
	assert.Equal(t, map[string]bool{"127.202.0.1": true}, sh.Gateways)
	assert.Equal(t, map[string]bool{svcA: true}, sh.Services)
	assert.Zero(t, w.SplitHorizonFor("network-1").Workloads, "local workloads are not split-horizon")
	assert.Equal(t, 1, w.PodWorkloads("cluster-1", nil), "the local pod, with its address")
	assert.Zero(t, w.PodWorkloads("cluster-1", func(string) bool { return false }), "kept by service")
	assert.Zero(t, w.PodWorkloads("cluster-2", nil), "no pod of another cluster")

	// A second global service appears in network-2: one more workload, capacities add up.
	f.push <- f.response(v3.AddressType, []*workloadapi.Address{splitHorizon("network-2", "127.202.0.1", svcB, 4)})
	waitFor(t, w, "second split-horizon workload", func(w *Watcher) bool { return w.SplitHorizonFor("network-2").Workloads == 2 })
	sh = w.SplitHorizonFor("network-2")
	assert.Equal(t, uint64(7), sh.Capacity)
	assert.Equal(t, map[string]bool{svcA: true, svcB: true}, sh.Services)
	assert.Equal(t, 1, w.SplitHorizonFor("network-3").Workloads, "other networks stay apart")

	// An update of the same resource replaces it (capacity 3 -> 10), it does not add one.
	f.push <- f.response(v3.AddressType, []*workloadapi.Address{splitHorizon("network-2", "127.202.0.1", svcA, 10)})
	waitFor(t, w, "capacity update", func(w *Watcher) bool { return w.SplitHorizonFor("network-2").Capacity == 14 })
	assert.Equal(t, 2, w.SplitHorizonFor("network-2").Workloads)

	// network-3 leaves: istiod removes its workload by name.
	gone := addressName(splitHorizon("network-3", "127.203.0.1", svcA, 0))
	f.push <- f.response(v3.AddressType, nil, gone)
	waitFor(t, w, "removal", func(w *Watcher) bool { return w.SplitHorizonFor("network-3").Workloads == 0 })
	assert.NotContains(t, w.Addresses(), gone)
	assert.Len(t, w.Addresses(), 3)
	f.mu.Lock()
	assert.Empty(t, f.nacks, "the watcher rejected istio's own types")
	f.mu.Unlock()
}

// istiod restarts: the watcher keeps what it had meanwhile, reconnects to the same address, and the
// new stream's answer replaces the state, removals included (as for ztunnel's resource versions).
func TestWatcherReconnectsAfterIstiodRestarts(t *testing.T) {
	c := newCA(t)
	a, b, d := localPod("a", svcA), localPod("b", svcA), localPod("d", svcA)
	f := startFakeIstiod(t, c.inter, c.root, a, b)
	w := start(t, f, c)
	require.Len(t, w.Addresses(), 2)
	var removed []string
	var mu sync.Mutex
	_, unsubscribe := w.Subscribe(func(u Update) {
		if u.Address == nil {
			mu.Lock()
			removed = append(removed, u.Name)
			mu.Unlock()
		}
	})
	defer unsubscribe()

	f.server.Stop()
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, w.Addresses(), 2, "the last state is kept while istiod is away")
	startFakeIstiodAt(t, f.addr, c.inter, c.root, a, d)
	waitFor(t, w, "the new stream's state", func(w *Watcher) bool {
		got := w.Addresses()
		_, hasD := got[addressName(d)]
		_, hasB := got[addressName(b)]
		return len(got) == 2 && hasD && !hasB
	})
	assert.Equal(t, 1, w.Reconnects())
	assert.False(t, w.LastSync().IsZero(), "the new stream answered in full")
	mu.Lock()
	assert.Equal(t, []string{addressName(b)}, removed, "what the new stream no longer holds is removed")
	mu.Unlock()
}

func TestStartFailsWithoutAServer(t *testing.T) {
	c := newCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = Start(context.Background(), Config{Address: addr, CertDir: c.dir, IP: "127.11.0.200", Name: "z", Node: "n", Cluster: "cluster-1"}, 500*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
}

// A restarted istiod that answers with the state the watcher kept: nothing changes but the sync,
// and a WaitFor on the reconnect must still wake. (It passes without onSynced's wake-up too, as
// this fake orders its answer; the suite's restart check is where the missed wake-up was suspected.)
func TestWaitForWakesOnAReconnectThatChangesNothing(t *testing.T) {
	c := newCA(t)
	a, b := localPod("a", svcA), localPod("b", svcA)
	f := startFakeIstiod(t, c.inter, c.root, a, b)
	w := start(t, f, c)
	f.server.Stop()
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		waited <- w.WaitFor(ctx, func(w *Watcher) bool { return w.Reconnects() > 0 && !w.LastSync().IsZero() })
	}()
	time.Sleep(100 * time.Millisecond) // the wait sleeps on the state before the reconnect
	startFakeIstiodAt(t, f.addr, c.inter, c.root, a, b)
	require.NoError(t, <-waited, "WaitFor woke for the reconnect's sync")
	assert.Len(t, w.Addresses(), 2)
}

// Drop, a controls' fault: what it matches leaves the state at once and stays out, whatever istiod
// sends, until it is lifted; the rest flows as before.
func TestDropLosesWhatItMatchesUntilLifted(t *testing.T) {
	c := newCA(t)
	f := startFakeIstiod(t, c.inter, c.root,
		localPod("echo-0", svcA),
		splitHorizon("network-2", "127.202.0.1", svcA, 3))
	w := start(t, f, c)
	network2 := func(_ string, a *workloadapi.Address) bool { return a.GetWorkload().GetNetwork() == "network-2" }

	w.Drop(network2)
	assert.Zero(t, w.SplitHorizonFor("network-2").Workloads, "dropped at once")
	f.push <- f.response(v3.AddressType, []*workloadapi.Address{splitHorizon("network-2", "127.202.0.1", svcA, 5), splitHorizon("network-3", "127.203.0.1", svcA, 1)})
	waitFor(t, w, "the unmatched update", func(w *Watcher) bool { return w.SplitHorizonFor("network-3").Workloads == 1 })
	assert.Zero(t, w.SplitHorizonFor("network-2").Workloads, "a matching update is ignored")
	assert.Equal(t, 1, w.PodWorkloads("cluster-1", nil), "what it does not match stays")

	w.Drop(nil)
	f.push <- f.response(v3.AddressType, []*workloadapi.Address{splitHorizon("network-2", "127.202.0.1", svcA, 6)})
	waitFor(t, w, "lifted", func(w *Watcher) bool { return w.SplitHorizonFor("network-2").Capacity == 6 })
}
