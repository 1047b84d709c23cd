package local

import (
	"net/netip"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// addressPlan is cluster index's share of the local address plan (topology/addresses.go): pod addresses
// an EndpointSlice accepts, each served on its loopback twin (emulator/dataplane/addrmap), and
// loopback node addresses.
type addressPlan int

func (p addressPlan) PodIP(n int) (netip.Addr, error)  { return topology.PodIP(int(p), n) }
func (p addressPlan) NodeIP(k int) (netip.Addr, error) { return topology.NodeIP(int(p), k) }

// addresses is what a local cluster tells the framework about its ranges.
func addresses(index int) (cluster.Addresses, error) {
	pods, err := topology.PodCIDR(index)
	if err != nil {
		return cluster.Addresses{}, err
	}
	nodes, err := topology.NodeCIDR(index)
	if err != nil {
		return cluster.Addresses{}, err
	}
	svcs, err := topology.ServiceCIDR(index)
	if err != nil {
		return cluster.Addresses{}, err
	}
	return cluster.Addresses{Pods: pods, Nodes: nodes, Services: svcs, Plan: addressPlan(index)}, nil
}
