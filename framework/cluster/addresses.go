package cluster

import (
	"fmt"
	"net/netip"
)

// Addresses is a cluster's address plan as its provider knows it. The framework's fake nodes and
// pods (workload, churn, the suites) take their addresses through it, so no code outside a
// provider knows that provider's ranges.
type Addresses struct {
	// Pods is the pod range (the cluster CIDR), Nodes where node addresses are and Services the
	// ClusterIP range; each is invalid where the provider does not know it.
	Pods, Nodes, Services netip.Prefix
	// Plan numbers pod and node addresses where the provider plans them itself (local). Nil means
	// node IPAM places them, as a CNI would: each fake node gets a spec.podCIDR from the
	// controller-manager, takes its first address and leaves the rest to its pods (kind, kube).
	Plan AddressPlan
}

// AddressPlan numbers the addresses of a provider that plans them (from 0); each fails past the
// plan's room.
type AddressPlan interface {
	PodIP(n int) (netip.Addr, error)
	NodeIP(k int) (netip.Addr, error)
}

// HostInCIDR is host n (from 0) of an IPv4 node podCIDR: the network address is skipped, and so
// is the broadcast address, which a host never takes.
func HostInCIDR(cidr netip.Prefix, n int) (netip.Addr, error) {
	cidr = cidr.Masked()
	if !cidr.Addr().Is4() || cidr.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("podCIDR %s: fake pods need an IPv4 range of at least 4 addresses", cidr)
	}
	hosts := 1<<(32-cidr.Bits()) - 2
	if n < 0 || n >= hosts {
		return netip.Addr{}, fmt.Errorf("podCIDR %s has %d host addresses; address %d asked for", cidr, hosts, n)
	}
	b := cidr.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n) + 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), nil
}
