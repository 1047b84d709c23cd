package join

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"istio.io/istio/pkg/workloadapi"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/topology"
)

// Three clusters: c1 and c2 share network-1, c3 is alone on network-2; two services of two pods
// each per cluster.
var (
	c1     = &cluster.Cluster{Cluster: topology.Cluster{Name: "c1", Network: "network-1"}}
	c2     = &cluster.Cluster{Cluster: topology.Cluster{Name: "c2", Network: "network-1"}}
	c3     = &cluster.Cluster{Cluster: topology.Cluster{Name: "c3", Network: "network-2"}}
	c4     = &cluster.Cluster{Cluster: topology.Cluster{Name: "c4", Network: "network-2"}}
	scale  = workload.Scale{Services: 2, Pods: 4, Namespaces: 1, Nodes: 1}
	gws    = map[string]string{"c1": "172.18.0.1", "c2": "172.18.0.2", "c3": "172.18.0.3", "c4": "172.18.0.4"}
	expect = func(members ...string) Expect {
		return Expect{Scale: scale, Clusters: []*cluster.Cluster{c1, c2, c3, c4},
			Members: func() []string { return members }, Gateway: func(c string) string { return gws[c] }}
	}
)

func addr(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

func hostname(n int) string {
	ns := scale.ServiceNamespace(n)
	return ns + "/" + workload.ServiceName(n) + "." + ns + ".svc.cluster.local"
}

// pods are c's scale pods as istiod sends them to a ztunnel on c's own network.
func pods(c *cluster.Cluster) map[string]*workloadapi.Address {
	out := map[string]*workloadapi.Address{}
	for k := range scale.Pods {
		uid := fmt.Sprintf("%s//Pod/ns/p%d", c.Name, k)
		out[uid] = &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
			Uid: uid, ClusterId: c.Name, Network: c.Network, Addresses: [][]byte{addr(fmt.Sprintf("10.0.0.%d", k+1))},
			Services: map[string]*workloadapi.PortList{hostname(k % scale.Services): {}},
		}}}
	}
	return out
}

// splitHorizon is network's split-horizon workloads through gw, each service's capacity cap.
func splitHorizon(network, gw string, capacity uint32) map[string]*workloadapi.Address {
	out := map[string]*workloadapi.Address{}
	for n := range scale.Services {
		uid := network + "/SplitHorizonWorkload/istio-system/istio-eastwestgateway/" + gw + "/" + hostname(n)
		out[uid] = &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: &workloadapi.Workload{
			Uid: uid, Network: network, Capacity: wrapperspb.UInt32(capacity),
			NetworkGateway: &workloadapi.GatewayAddress{Destination: &workloadapi.GatewayAddress_Address{
				Address: &workloadapi.NetworkAddress{Network: network, Address: addr(gw)}}},
			Services: map[string]*workloadapi.PortList{hostname(n): {}},
		}}}
	}
	return out
}

func merge(ms ...map[string]*workloadapi.Address) map[string]*workloadapi.Address {
	out := map[string]*workloadapi.Address{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestHoldsSameNetworkWantsEveryPod(t *testing.T) {
	e := expect("c1", "c2")
	assert.True(t, e.Holds(c2)(xdswatch.Holding("c1", pods(c2))))
	partial := pods(c2)
	delete(partial, "c2//Pod/ns/p0")
	w := xdswatch.Holding("c1", partial)
	assert.False(t, e.Holds(c2)(w), "one pod missing")
	assert.Equal(t, "3 of 4 pod workloads of c2 (same network)", e.HeldOf(w, c2))
	assert.Equal(t, report.CriterionPodWorkloads, Criterion(c1, c2))
}

func TestHoldsOtherNetworkWantsSplitHorizonThroughItsGateway(t *testing.T) {
	e := expect("c1", "c3")
	// Two pods per service in c3: capacity 2 each, through c3's gateway.
	assert.True(t, e.Holds(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 2))))
	assert.False(t, e.Holds(c3)(xdswatch.Holding("c1", splitHorizon("network-2", "172.18.9.9", 2))), "through a gateway not on the network")
	assert.False(t, e.Holds(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 1))), "capacity short")
	assert.False(t, e.Holds(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 3))), "capacity over: exact")
	assert.True(t, e.Covers(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 3))), "covers allows more")
	assert.Equal(t, report.CriterionSplitHorizon, Criterion(c1, c3))
}

// istiod coalesces a network's clusters into one capacity: with c4 joined too, c3 is held when the
// capacity counts both; an isolated istiod that holds only c3 wants c3's alone.
func TestHoldsCountsEveryHeldClusterOnTheNetwork(t *testing.T) {
	both := xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 4))
	assert.True(t, expect("c1", "c3", "c4").Holds(c3)(both))
	assert.False(t, expect("c1", "c3", "c4").Holds(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 2))))
	iso := expect("c1", "c3", "c4").Isolated()
	assert.True(t, iso.Holds(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c4"], 2))), "either gateway of the network")
	assert.False(t, iso.Holds(c3)(both))
}

func TestLacks(t *testing.T) {
	assert.True(t, expect("c1").Lacks(c3)(xdswatch.Holding("c1", nil)))
	assert.False(t, expect("c1").Lacks(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 2))))
	// c4 stays: the network's capacity falls back to c4's pods.
	assert.True(t, expect("c1", "c4").Lacks(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c4"], 2))))
	assert.False(t, expect("c1", "c4").Lacks(c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c4"], 4))))
	assert.True(t, expect("c1").Lacks(c2)(xdswatch.Holding("c1", pods(c1))), "only its own cluster's pods")
	assert.False(t, expect("c1").Lacks(c2)(xdswatch.Holding("c1", merge(pods(c1), pods(c2)))))
}

func TestSameAs(t *testing.T) {
	e := expect("c1", "c3")
	ref := xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 2))
	assert.True(t, e.SameAs(ref, c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c3"], 2))))
	assert.False(t, e.SameAs(ref, c3)(xdswatch.Holding("c1", splitHorizon("network-2", gws["c4"], 2))), "another gateway")
}

func TestIsScaleService(t *testing.T) {
	assert.True(t, IsScaleService(hostname(0)))
	assert.False(t, IsScaleService(workload.ProbeNamespace+"/echo-local."+workload.ProbeNamespace+".svc.cluster.local"))
	assert.False(t, IsScaleService("scale-0/waypoint.scale-0.svc.cluster.local"), "a waypoint beside the scale services")
}
