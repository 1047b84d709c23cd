package dataplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/ambientmc/ambientmc/emulator/dataplane/addrmap"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"istio.io/istio/pkg/workloadapi"
)

// Routing without clusters: endpoint choice (healthy only, FAILOVER ranking over several
// preferences, capacity weights), the gateway's choice of a local endpoint, and what the gateway
// and the destination ztunnel answer for a service they do not know. view_test.go covers the
// two-network FAILOVER/STRICT cases and the 1:3 split-horizon weight.

const echoKey = "probe/echo.probe.svc.cluster.local"

func echoService(lb *workloadapi.LoadBalancing) *workloadapi.Address {
	return &workloadapi.Address{Type: &workloadapi.Address_Service{Service: &workloadapi.Service{
		Name: "echo", Namespace: "probe", Hostname: "echo.probe.svc.cluster.local",
		Addresses:     []*workloadapi.NetworkAddress{{Network: "network-1", Address: []byte{127, 101, 0, 10}}},
		Ports:         []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}},
		LoadBalancing: lb,
	}}}
}

type pod struct {
	name, network, node, region, zone string
	subzone                           string
	cluster                           string
	addr                              netip.Addr
	healthy                           bool
	capacity                          uint32 // 0: unset
	service                           bool   // behind echo
}

func (p pod) address() *workloadapi.Address {
	st := workloadapi.WorkloadStatus_UNHEALTHY
	if p.healthy {
		st = workloadapi.WorkloadStatus_HEALTHY
	}
	w := &workloadapi.Workload{Uid: "c//Pod/probe/" + p.name, Name: p.name, Namespace: "probe", ServiceAccount: p.name,
		Network: p.network, Node: p.node, ClusterId: p.cluster, Status: st, Addresses: [][]byte{p.addr.AsSlice()},
		Locality: &workloadapi.Locality{Region: p.region, Zone: p.zone, Subzone: p.subzone}}
	if p.capacity > 0 {
		w.Capacity = wrapperspb.UInt32(p.capacity)
	}
	if p.service {
		w.Services = map[string]*workloadapi.PortList{echoKey: {Ports: []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}}}}
	}
	return &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: w}}
}

func view(lb *workloadapi.LoadBalancing, pods ...pod) *View {
	addrs := map[string]*workloadapi.Address{echoKey: echoService(lb)}
	for _, p := range pods {
		addrs["c//Pod/probe/"+p.name] = p.address()
	}
	return BuildView(addrs)
}

var client = pod{name: "client", network: "network-1", node: "n0", region: "r1", zone: "z1", addr: netip.MustParseAddr("127.11.0.1"), healthy: true}

// picks counts which pod each of n picks from client went to.
func picks(t *testing.T, v *View, n int) map[string]int {
	t.Helper()
	return picksFrom(t, v, client, n)
}

// picksFrom counts which pod each of n picks from pod from went to.
func picksFrom(t *testing.T, v *View, from pod, n int) map[string]int {
	t.Helper()
	svc := v.ServiceByHostname("echo.probe.svc.cluster.local")
	src := v.WorkloadByAddr(from.addr)
	r := rand.New(rand.NewPCG(7, 7))
	out := map[string]int{}
	for range n {
		ep, err := v.Pick(svc, src, 80, r)
		require.NoError(t, err)
		out[ep.UID[len("c//Pod/probe/"):]]++
	}
	return out
}

func TestPickNeverChoosesAnUnhealthyEndpoint(t *testing.T) {
	up := pod{name: "up", network: "network-1", addr: netip.MustParseAddr("127.11.0.2"), healthy: true, service: true, capacity: 1}
	down := pod{name: "down", network: "network-1", addr: netip.MustParseAddr("127.11.0.3"), service: true, capacity: 100}
	assert.Equal(t, map[string]int{"up": 500}, picks(t, view(nil, client, up, down), 500), "capacity does not make an unhealthy pod eligible")

	v := view(nil, client, down)
	_, err := v.Pick(v.ServiceByHostname("echo.probe.svc.cluster.local"), v.WorkloadByAddr(client.addr), 80, rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "no healthy endpoints")
}

// FAILOVER ranks by how many leading preferences match: same zone beats same region beats same
// network, and each tier takes over only when the better one has no healthy endpoint.
func TestPickFailoverWalksThePreferenceTiers(t *testing.T) {
	lb := &workloadapi.LoadBalancing{Mode: workloadapi.LoadBalancing_FAILOVER, RoutingPreference: []workloadapi.LoadBalancing_Scope{
		workloadapi.LoadBalancing_NETWORK, workloadapi.LoadBalancing_REGION, workloadapi.LoadBalancing_ZONE}}
	zone := pod{name: "zone", network: "network-1", region: "r1", zone: "z1", addr: netip.MustParseAddr("127.11.0.2"), healthy: true, service: true}
	region := pod{name: "region", network: "network-1", region: "r1", zone: "z2", addr: netip.MustParseAddr("127.11.0.3"), healthy: true, service: true}
	network := pod{name: "network", network: "network-1", region: "r2", zone: "z9", addr: netip.MustParseAddr("127.11.0.4"), healthy: true, service: true}
	// Same zone but another network: matches no leading preference, so it is the last resort.
	far := pod{name: "far", network: "network-2", region: "r1", zone: "z1", addr: netip.MustParseAddr("127.12.0.5"), healthy: true, service: true}

	assert.Equal(t, map[string]int{"zone": 200}, picks(t, view(lb, client, zone, region, network, far), 200))
	zone.healthy = false
	assert.Equal(t, map[string]int{"region": 200}, picks(t, view(lb, client, zone, region, network, far), 200))
	region.healthy = false
	assert.Equal(t, map[string]int{"network": 200}, picks(t, view(lb, client, zone, region, network, far), 200))
	network.healthy = false
	assert.Equal(t, map[string]int{"far": 200}, picks(t, view(lb, client, zone, region, network, far), 200))
}

// With NETWORK first, ztunnel skips a network that differs and ranks the endpoint by the rest of
// the preferences, and the same network outranks them all (src/state.rs load_balance): of two
// endpoints on another network, the one in the client's region is chosen.
func TestPickFailoverRanksOtherNetworksByTheRestOfThePreferences(t *testing.T) {
	lb := &workloadapi.LoadBalancing{Mode: workloadapi.LoadBalancing_FAILOVER, RoutingPreference: []workloadapi.LoadBalancing_Scope{
		workloadapi.LoadBalancing_NETWORK, workloadapi.LoadBalancing_REGION}}
	near := pod{name: "near", network: "network-2", region: "r1", addr: netip.MustParseAddr("127.12.0.2"), healthy: true, service: true}
	far := pod{name: "far", network: "network-3", region: "r9", addr: netip.MustParseAddr("127.13.0.3"), healthy: true, service: true}
	assert.Equal(t, map[string]int{"near": 200}, picks(t, view(lb, client, near, far), 200))
	home := pod{name: "home", network: "network-1", region: "r9", addr: netip.MustParseAddr("127.11.0.4"), healthy: true, service: true}
	assert.Equal(t, map[string]int{"home": 200}, picks(t, view(lb, client, near, far, home), 200), "the same network, in another region, outranks the rest")
	strict := &workloadapi.LoadBalancing{Mode: workloadapi.LoadBalancing_STRICT, RoutingPreference: lb.RoutingPreference}
	v := view(strict, client, near, far)
	_, err := v.Pick(v.ServiceByHostname("echo.probe.svc.cluster.local"), v.WorkloadByAddr(client.addr), 80, rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "strict", "STRICT needs every preference, the network too")
}

// SUBZONE is a preference of its own, not a match for every endpoint.
func TestPickFailoverRanksBySubzone(t *testing.T) {
	lb := &workloadapi.LoadBalancing{Mode: workloadapi.LoadBalancing_FAILOVER, RoutingPreference: []workloadapi.LoadBalancing_Scope{
		workloadapi.LoadBalancing_REGION, workloadapi.LoadBalancing_ZONE, workloadapi.LoadBalancing_SUBZONE}}
	src := client
	src.subzone = "s1"
	same := pod{name: "same", network: "network-1", region: "r1", zone: "z1", subzone: "s1", addr: netip.MustParseAddr("127.11.0.2"), healthy: true, service: true}
	other := pod{name: "other", network: "network-1", region: "r1", zone: "z1", subzone: "s2", addr: netip.MustParseAddr("127.11.0.3"), healthy: true, service: true}
	assert.Equal(t, map[string]int{"same": 100}, picksFrom(t, view(lb, src, same, other), src, 100))
}

// A service whose policy allows every endpoint keeps the unhealthy ones (src/state/service.rs
// should_include_endpoint).
func TestPickAllowAllKeepsUnhealthyEndpoints(t *testing.T) {
	down := pod{name: "down", network: "network-1", addr: netip.MustParseAddr("127.11.0.3"), service: true}
	lb := &workloadapi.LoadBalancing{HealthPolicy: workloadapi.LoadBalancing_ALLOW_ALL}
	assert.Equal(t, map[string]int{"down": 50}, picks(t, view(lb, client, down), 50))
}

// A port the service does not have is refused, and an endpoint that serves no target port for the
// service's port is left out (src/state.rs load_balance's port filter).
func TestPickFiltersByPort(t *testing.T) {
	mapped := pod{name: "mapped", network: "network-1", addr: netip.MustParseAddr("127.11.0.2"), healthy: true, service: true}
	unmapped := pod{name: "unmapped", network: "network-1", addr: netip.MustParseAddr("127.11.0.3"), healthy: true}
	addrs := map[string]*workloadapi.Address{echoKey: echoService(nil), "c//Pod/probe/mapped": mapped.address(), "c//Pod/probe/unmapped": unmapped.address(),
		"c//Pod/probe/client": client.address()}
	// unmapped is in the service with no port of its own, and the service names no target port.
	w := addrs["c//Pod/probe/unmapped"].GetWorkload()
	w.Services = map[string]*workloadapi.PortList{echoKey: {}}
	addrs[echoKey].GetService().Ports = []*workloadapi.Port{{ServicePort: 80}}
	v := BuildView(addrs)
	assert.Equal(t, map[string]int{"mapped": 100}, picks(t, v, 100))
	_, err := v.Pick(v.ServiceByHostname("echo.probe.svc.cluster.local"), v.WorkloadByAddr(client.addr), 81, rand.New(rand.NewPCG(9, 9)))
	assert.ErrorContains(t, err, "has no port 81")
}

func TestPickWeighsByCapacity(t *testing.T) {
	a := pod{name: "a", network: "network-1", addr: netip.MustParseAddr("127.11.0.2"), healthy: true, service: true, capacity: 1}
	b := pod{name: "b", network: "network-1", addr: netip.MustParseAddr("127.11.0.3"), healthy: true, service: true, capacity: 9}
	got := picks(t, view(nil, client, a, b), 5000)
	assert.InDelta(t, 0.9, float64(got["b"])/5000, 0.02, "capacity 9 of 10: %v", got)
	// Unset capacity counts as one endpoint.
	c := pod{name: "c", network: "network-1", addr: netip.MustParseAddr("127.11.0.4"), healthy: true, service: true}
	got = picks(t, view(nil, client, a, c), 4000)
	assert.InDelta(t, 0.5, float64(got["c"])/4000, 0.03, "%v", got)
}

// loopbackHBONE listens on a free 127.x address's port 15008 outside the run's address plan,
// standing in for a destination ztunnel; it counts what it accepts.
func loopbackHBONE(t *testing.T) (netip.Addr, chan struct{}) {
	t.Helper()
	for range 20 {
		a := netip.AddrFrom4([4]byte{127, 253, byte(1 + rand.IntN(250)), byte(1 + rand.IntN(250))})
		l, err := net.Listen("tcp", netip.AddrPortFrom(a, HBONEPort).String())
		if err != nil {
			continue
		}
		t.Cleanup(func() { _ = l.Close() })
		accepted := make(chan struct{}, 100)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
				accepted <- struct{}{}
			}
		}()
		return a, accepted
	}
	t.Skip("no free 127.253.x.y:15008 on this host")
	return netip.Addr{}, nil
}

func gatewayWith(v *View) *Gateway {
	g := &Gateway{cluster: "cluster-2", network: "network-2", dial: addrmap.Dial, rand: rand.New(rand.NewPCG(3, 3))}
	g.view.Store(v)
	return g
}

// The gateway forwards only to healthy endpoints on its own network.
func TestGatewayRoutesToAHealthyLocalEndpoint(t *testing.T) {
	addr, accepted := loopbackHBONE(t)
	good := pod{name: "good", network: "network-2", addr: addr, healthy: true, service: true}
	down := pod{name: "down", network: "network-2", addr: netip.MustParseAddr("127.253.0.1"), service: true}
	other := pod{name: "other", network: "network-1", addr: netip.MustParseAddr("127.253.0.2"), healthy: true, service: true}
	g := gatewayWith(view(nil, good, down, other))
	for i := range 20 {
		up, status, err := g.route(context.Background(), &http.Request{Host: "echo.probe.svc.cluster.local:80"}, "")
		require.NoError(t, err, "route %d", i)
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, netip.AddrPortFrom(addr, HBONEPort).String(), up.RemoteAddr().String())
		_ = up.Close()
		<-accepted
	}
	assert.Equal(t, int64(20), g.Forwarded.Load())
	assert.Zero(t, g.Refused.Load())

	g = gatewayWith(view(nil, down, other))
	_, status, err := g.route(context.Background(), &http.Request{Host: "echo.probe.svc.cluster.local:80"}, "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.ErrorContains(t, err, "no healthy endpoint in cluster cluster-2")
}

func TestUnknownServiceIsRefused(t *testing.T) {
	g := gatewayWith(view(nil))
	_, status, err := g.route(context.Background(), &http.Request{Host: "nope.probe.svc.cluster.local:80"}, "")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.ErrorContains(t, err, "no service nope.probe.svc.cluster.local")
	_, status, _ = g.route(context.Background(), &http.Request{Host: "no-port"}, "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, int64(2), g.Refused.Load())

	// The destination ztunnel: a hostname authority it has no service for, or an IP that is not
	// the pod the tunnel reached.
	dst := pod{name: "echo", network: "network-1", addr: netip.MustParseAddr("127.11.0.2"), healthy: true, service: true}
	z := &Ztunnel{}
	z.view.Store(view(nil, dst))
	h := z.inboundHandler(dst.addr)
	_, status, err = h(context.Background(), &http.Request{Host: "nope.probe.svc.cluster.local:80"}, "spiffe://cluster.local/ns/probe/sa/client")
	assert.Equal(t, http.StatusNotFound, status)
	assert.ErrorContains(t, err, "unknown service")
	_, status, err = h(context.Background(), &http.Request{Host: fmt.Sprintf("%s:8080", "127.11.0.9")}, "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.ErrorContains(t, err, "is not this pod")
	assert.Equal(t, int64(2), z.Stats.InboundRefused.Load())
	assert.Zero(t, z.Stats.Inbound.Load())
}

// Two clusters on one network both have a node called n1: each node's ztunnel serves only its own
// cluster's pods, though istiod sends it the other's with their own addresses too.
func TestInboundIsThisNodesPodsOfThisCluster(t *testing.T) {
	mine := pod{name: "mine", cluster: "c1", network: "network-1", node: "n1", addr: netip.MustParseAddr("10.11.0.5"), healthy: true, service: true}
	peer := pod{name: "peer", cluster: "c2", network: "network-1", node: "n1", addr: netip.MustParseAddr("10.12.0.5"), healthy: true, service: true}
	other := pod{name: "other", cluster: "c1", network: "network-1", node: "n2", addr: netip.MustParseAddr("10.11.0.6"), healthy: true, service: true}
	in := inboundFor(view(nil, mine, peer, other), Node{Cluster: "c1", Network: "network-1", Name: "n1"})
	require.Len(t, in, 1)
	require.Contains(t, in, mine.addr)
}
