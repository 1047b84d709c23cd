package kindconfig

import (
	"fmt"
	"net/netip"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
)

// LoadBalancer addresses. Istio's kind_provisioner hands each cluster 50 addresses from one shared
// list of 400 and so stops at 8 clusters. The framework cuts the kind docker network's subnet
// instead: the pools live in its upper quarter (docker allocates node addresses from the bottom),
// one aligned /28 per cluster index, so cluster i always gets the same pool and no two pools meet.
// A /16 kind network (docker's usual 172.18.0.0/16) has room for 1024 pools; MaxClusters need 50.
const (
	poolBits = 28 // 16 addresses per cluster: the east-west gateway needs one, tests may add more
	// DefaultNetworkSubnet is the subnet docker usually gives the kind network; render uses it
	// when no Docker is there to ask.
	DefaultNetworkSubnet = "172.18.0.0/16"
)

// Pools returns n LoadBalancer pools cut from net's upper quarter, pool k-1 for cluster index k.
func Pools(net dockerhost.Network, n int) ([]netip.Prefix, error) {
	sub := net.Subnet.Masked()
	if !sub.Addr().Is4() {
		return nil, fmt.Errorf("docker network subnet %s: want IPv4", sub)
	}
	if sub.Bits() > poolBits-2 {
		return nil, fmt.Errorf("docker network kind has subnet %s, too small for LoadBalancer pools of 16 addresses in its upper quarter; recreate it larger: docker network rm kind && docker network create kind --subnet %s", sub, DefaultNetworkSubnet)
	}
	size := uint32(1) << (32 - sub.Bits())
	start := u32(sub.Addr()) + size/4*3
	room := int(size / 4 / (1 << (32 - poolBits)))
	// The last pool would hold the broadcast address.
	room--
	if n > room {
		return nil, fmt.Errorf("docker network kind has subnet %s: its upper quarter holds %d LoadBalancer pools of 16 addresses, %d clusters need %d; use fewer clusters or recreate the network larger: docker network rm kind && docker network create kind --subnet %s", sub, room, n, n, DefaultNetworkSubnet)
	}
	out := make([]netip.Prefix, n)
	for k := range n {
		p := netip.PrefixFrom(a4(start+uint32(k)<<(32-poolBits)), poolBits)
		if net.IPRange.IsValid() && net.IPRange.Overlaps(p) {
			return nil, fmt.Errorf("docker network kind allocates container addresses from %s, which overlaps LoadBalancer pool %s; recreate the network without --ip-range or with one in the lower three quarters of %s", net.IPRange, p, sub)
		}
		out[k] = p
	}
	return out, nil
}

// CheckPlan refuses a docker network that overlaps the clusters' pod or service subnets.
func CheckPlan(net dockerhost.Network, n int) error {
	for i := 1; i <= n; i++ {
		pods, err := PodSubnet(i)
		if err != nil {
			return err
		}
		svcs, _ := ServiceSubnet(i)
		for _, p := range []netip.Prefix{pods, svcs} {
			if p.Overlaps(net.Subnet) {
				return fmt.Errorf("docker network kind has subnet %s, which overlaps cluster %d's range %s; recreate it elsewhere: docker network rm kind && docker network create kind --subnet %s", net.Subnet, i, p, DefaultNetworkSubnet)
			}
		}
	}
	return nil
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func a4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
