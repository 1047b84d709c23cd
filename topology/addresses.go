package topology

import (
	"fmt"
	"net/netip"
)

// The local provider's address plan. Everything sits in 127.0.0.0/8 so all traffic stays on
// loopback; the second octet encodes the cluster index, so ranges of different clusters never overlap.

// MaxClusters is the most clusters the address plan has room for (second octets 11..60, 101..150, 201..250).
const MaxClusters = 50

const (
	podOctetBase     = 10  // pods and nodes: 127.(10+i).0.0/16
	serviceOctetBase = 100 // ClusterIPs: 127.(100+i).0.0/16
	gatewayOctetBase = 200 // east-west gateway: 127.(200+i).0.1

	nodeOctet = 255 // 127.(10+i).255.0/24 holds node addresses, not pods
	// MaxNodes is how many node addresses one cluster has (127.(10+i).255.1 to .254).
	MaxNodes = 254
	// MaxPods is how many pod addresses one cluster has: 255 /24s of 254 hosts (.0 and .255 skipped).
	MaxPods = nodeOctet * 254
)

func checkIndex(i int) error {
	if i < 1 || i > MaxClusters {
		return fmt.Errorf("address plan: cluster index %d out of range 1..%d", i, MaxClusters)
	}
	return nil
}

func loopback(b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(b), byte(c), byte(d)})
}

// PodCIDR is cluster i's pod range, 127.(10+i).0.0/16 (its last /24 holds node addresses).
func PodCIDR(i int) (netip.Prefix, error) {
	if err := checkIndex(i); err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(loopback(podOctetBase+i, 0, 0), 16), nil
}

// ServiceCIDR is cluster i's ClusterIP range, 127.(100+i).0.0/16 (kube-apiserver --service-cluster-ip-range).
func ServiceCIDR(i int) (netip.Prefix, error) {
	if err := checkIndex(i); err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(loopback(serviceOctetBase+i, 0, 0), 16), nil
}

// GatewayIP is cluster i's east-west gateway address, 127.(200+i).0.1.
func GatewayIP(i int) (netip.Addr, error) {
	if err := checkIndex(i); err != nil {
		return netip.Addr{}, err
	}
	return loopback(gatewayOctetBase+i, 0, 1), nil
}

// PodIP is the n-th pod address (n from 0) of cluster i, skipping .0 and .255 in each /24
// and the node /24.
func PodIP(i, n int) (netip.Addr, error) {
	if err := checkIndex(i); err != nil {
		return netip.Addr{}, err
	}
	if n < 0 || n >= MaxPods {
		return netip.Addr{}, fmt.Errorf("address plan: pod %d of cluster %d out of range: %d pods fit per cluster (0..%d)", n, i, MaxPods, MaxPods-1)
	}
	return loopback(podOctetBase+i, n/254, n%254+1), nil
}

// NodeIP is the address of node number node (from 0) of cluster i, 127.(10+i).255.(node+1).
func NodeIP(i, node int) (netip.Addr, error) {
	if err := checkIndex(i); err != nil {
		return netip.Addr{}, err
	}
	if node < 0 || node >= MaxNodes {
		return netip.Addr{}, fmt.Errorf("address plan: node %d of cluster %d out of range: %d nodes fit per cluster (0..%d)", node, i, MaxNodes, MaxNodes-1)
	}
	return loopback(podOctetBase+i, nodeOctet, node+1), nil
}
