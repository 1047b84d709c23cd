package dataplane

import (
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"istio.io/istio/pkg/workloadapi"
)

// addresses builds what istiod sends for a service with one local pod (network-1) and a
// split-horizon workload for network-2 standing for 3 pods behind 127.202.0.1.
func addresses(lb *workloadapi.LoadBalancing, localHealthy bool) map[string]*workloadapi.Address {
	svcKey := "probe/echo.probe.svc.cluster.local"
	ports := &workloadapi.PortList{Ports: []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}}}
	status := workloadapi.WorkloadStatus_HEALTHY
	if !localHealthy {
		status = workloadapi.WorkloadStatus_UNHEALTHY
	}
	return map[string]*workloadapi.Address{
		svcKey: {Type: &workloadapi.Address_Service{Service: &workloadapi.Service{
			Name: "echo", Namespace: "probe", Hostname: "echo.probe.svc.cluster.local",
			Addresses:     []*workloadapi.NetworkAddress{{Network: "network-1", Address: []byte{127, 101, 0, 10}}},
			Ports:         []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}},
			LoadBalancing: lb,
		}}},
		"c1//Pod/probe/echo-0": {Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
			Uid: "c1//Pod/probe/echo-0", Namespace: "probe", ServiceAccount: "echo", Network: "network-1",
			Addresses: [][]byte{{127, 11, 0, 2}}, Node: "n1", Status: status,
			Locality: &workloadapi.Locality{Region: "r1", Zone: "z1"},
			Services: map[string]*workloadapi.PortList{svcKey: ports},
		}}},
		"network-2/SplitHorizonWorkload/x": {Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
			Uid: "network-2/SplitHorizonWorkload/x", Network: "network-2", Capacity: wrapperspb.UInt32(3),
			NetworkGateway: &workloadapi.GatewayAddress{Destination: &workloadapi.GatewayAddress_Address{
				Address: &workloadapi.NetworkAddress{Network: "network-2", Address: []byte{127, 202, 0, 1}}}, HboneMtlsPort: 15008},
			Services: map[string]*workloadapi.PortList{svcKey: ports},
		}}},
		"c1//Pod/probe/client": {Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
			Uid: "c1//Pod/probe/client", Namespace: "probe", ServiceAccount: "client", Network: "network-1",
			Addresses: [][]byte{{127, 11, 0, 1}}, Node: "n0", Locality: &workloadapi.Locality{Region: "r1", Zone: "z1"},
		}}},
	}
}

// share picks many times and returns the fraction that went to the local pod.
func share(t *testing.T, v *View) float64 {
	t.Helper()
	svc := v.ServiceByVIP("network-1", netip.MustParseAddr("127.101.0.10"), "probe")
	require.NotNil(t, svc)
	src := v.WorkloadByAddr(netip.MustParseAddr("127.11.0.1"))
	require.NotNil(t, src)
	r := rand.New(rand.NewPCG(1, 2))
	local := 0
	const n = 4000
	for range n {
		ep, err := v.Pick(svc, src, 80, r)
		require.NoError(t, err)
		if ep.Addr.IsValid() {
			local++
		}
	}
	return float64(local) / n
}

func TestPickWeighsSplitHorizonByCapacity(t *testing.T) {
	// No policy: 1 local pod and a split-horizon workload of capacity 3, so about a quarter local.
	assert.InDelta(t, 0.25, share(t, BuildView(addresses(nil, true))), 0.04)
}

func TestPickFailoverPrefersTheSourceNetwork(t *testing.T) {
	lb := &workloadapi.LoadBalancing{Mode: workloadapi.LoadBalancing_FAILOVER, RoutingPreference: []workloadapi.LoadBalancing_Scope{
		workloadapi.LoadBalancing_NETWORK, workloadapi.LoadBalancing_REGION, workloadapi.LoadBalancing_ZONE}}
	assert.Equal(t, 1.0, share(t, BuildView(addresses(lb, true))), "healthy local endpoint takes everything")
	assert.Equal(t, 0.0, share(t, BuildView(addresses(lb, false))), "unhealthy local endpoint fails over to the other network")
}

func TestPickStrictRefusesOtherNetworks(t *testing.T) {
	lb := &workloadapi.LoadBalancing{Mode: workloadapi.LoadBalancing_STRICT, RoutingPreference: []workloadapi.LoadBalancing_Scope{workloadapi.LoadBalancing_NETWORK}}
	v := BuildView(addresses(lb, false))
	svc := v.ServiceByHostname("echo.probe.svc.cluster.local")
	_, err := v.Pick(svc, v.WorkloadByAddr(netip.MustParseAddr("127.11.0.1")), 80, rand.New(rand.NewPCG(1, 1)))
	assert.ErrorContains(t, err, "strict")
}

func TestViewIndexes(t *testing.T) {
	v := BuildView(addresses(nil, true))
	svc := v.ServiceByHostname("echo.probe.svc.cluster.local")
	require.NotNil(t, svc)
	assert.Len(t, v.Endpoints(svc), 2)
	pod := v.WorkloadByAddr(netip.MustParseAddr("127.11.0.2"))
	require.NotNil(t, pod)
	assert.Equal(t, "spiffe://cluster.local/ns/probe/sa/echo", pod.Identity)
	assert.Equal(t, uint32(8080), svc.TargetPort(pod, 80))
}

func TestWorkloadsPerClusterCountsEveryWorkload(t *testing.T) {
	addrs := addresses(nil, true)
	addrs["c1//Pod/probe/echo-0"].GetWorkload().ClusterId = "c1"
	assert.Equal(t, "workloads per cluster:  2, c1 1", BuildView(addrs).WorkloadsPerCluster(),
		"the pod in c1, and the split-horizon workload and the client, which carry no cluster here")
}

// Pod finds a pod by cluster, namespace and name, the way istio-cni names the pods it hands over.
func TestViewPod(t *testing.T) {
	addrs := addresses(nil, true)
	for _, k := range []string{"c1//Pod/probe/echo-0", "c1//Pod/probe/client"} {
		w := addrs[k].GetWorkload()
		w.ClusterId, w.Name = "c1", strings.TrimPrefix(k, "c1//Pod/probe/")
	}
	v := BuildView(addrs)
	ep := v.Pod("c1", "probe", "client")
	require.NotNil(t, ep)
	assert.Equal(t, netip.MustParseAddr("127.11.0.1"), ep.Addr)
	assert.Equal(t, "echo-0", v.Pod("c1", "probe", "echo-0").Name)
	assert.Nil(t, v.Pod("c2", "probe", "client"), "another cluster's pod of the same name")
	assert.Nil(t, v.Pod("c1", "other", "client"))
	assert.Nil(t, v.Pod("", "", ""), "split-horizon workloads have no pod name")
}

// A VIP is one network's: a service at the same address on another network is another service,
// and of two at one address on the client's network, the one in its namespace wins (ztunnel's
// get_best_by_vip).
func TestServiceByVIPIsNetworkAndAddress(t *testing.T) {
	svc := func(ns, network string) *workloadapi.Address {
		return &workloadapi.Address{Type: &workloadapi.Address_Service{Service: &workloadapi.Service{
			Name: "s", Namespace: ns, Hostname: "s." + ns + ".svc.cluster.local",
			Addresses: []*workloadapi.NetworkAddress{{Network: network, Address: []byte{10, 96, 0, 10}}},
			Ports:     []*workloadapi.Port{{ServicePort: 80, TargetPort: 8080}},
		}}}
	}
	v := BuildView(map[string]*workloadapi.Address{"a/s": svc("a", "network-1"), "b/s": svc("b", "network-1"), "c/s": svc("c", "network-2")})
	vip := netip.MustParseAddr("10.96.0.10")
	assert.Equal(t, "s.c.svc.cluster.local", v.ServiceByVIP("network-2", vip, "a").Hostname, "the other network's service at that address")
	assert.Equal(t, "s.b.svc.cluster.local", v.ServiceByVIP("network-1", vip, "b").Hostname, "the client's namespace first")
	assert.Equal(t, "s.a.svc.cluster.local", v.ServiceByVIP("network-1", vip, "z").Hostname, "else the first by hostname")
	assert.Nil(t, v.ServiceByVIP("network-3", vip, "a"), "no service at that address on a third network")
}
