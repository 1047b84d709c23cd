package topology

import (
	"fmt"
	"net"
	"net/netip"
)

// The local provider's address plan; the second octet encodes the cluster index, so ranges of
// different clusters never overlap. Pod addresses are 10.(10+i).a.b, which the API server accepts
// in EndpointSlices (it refuses loopback ones); they are API data only. The emulated data plane
// serves each on the loopback address with the same low octets, 127.(10+i).a.b (LoopbackOf), so
// all traffic stays on loopback; from cluster 91 the pods' loopback twins take the second octets
// 1..10, the last ones free below the ClusterIP ranges (twinOctet). Nodes, ClusterIPs and
// gateways are loopback addresses; gateways past cluster 50 share the /16s of the first 50's.

// MaxClusters is the most clusters the address plan has room for (second octets 1..10 and 11..100
// for pods' loopback twins, 101..200 for ClusterIPs, 201..250 for gateways).
const MaxClusters = 100

const (
	podOctetBase     = 10  // pods: 10.(10+i).0.0/16, served on 127.(10+i).0.0/16; nodes 127.(10+i).255.0/24
	serviceOctetBase = 100 // ClusterIPs: 127.(100+i).0.0/16
	gatewayOctetBase = 200 // east-west gateway: 127.(200+i).0.1, past cluster 50 127.(150+i).1.1

	// twinOctetsAbove90: clusters past 90 have their pods' loopback twins in 127.(i-90).0.0/16.
	twinOctetsAbove90 = 90
	// gatewaysPerOctet: clusters past 50 have their gateway in the /16 of cluster i-50's.
	gatewaysPerOctet = 50

	// nodeOctet: 127.(10+i).255.0/24 holds node addresses, so no pod takes 10.(10+i).255.x, whose
	// loopback socket would be a node's.
	nodeOctet = 255
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

// twinOctet is the second octet of cluster i's pods' loopback twins and nodes.
func twinOctet(i int) int {
	if i > twinOctetsAbove90 {
		return i - twinOctetsAbove90
	}
	return podOctetBase + i
}

func loopback(b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(b), byte(c), byte(d)})
}

func podAddr(b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(b), byte(c), byte(d)})
}

// clusterPrefix is the range of cluster i that starts at first and has bits fixed, once i is
// known to be a cluster index of the plan.
func clusterPrefix(i int, first netip.Addr, bits int) (netip.Prefix, error) {
	if err := checkIndex(i); err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(first, bits), nil
}

// PodCIDR is cluster i's pod range, 10.(10+i).0.0/16 (kube-controller-manager --cluster-cidr).
func PodCIDR(i int) (netip.Prefix, error) {
	return clusterPrefix(i, podAddr(podOctetBase+i, 0, 0), 16)
}

// NodeCIDR is where cluster i's node addresses are, 127.(10+i).255.0/24 (twinOctet).
func NodeCIDR(i int) (netip.Prefix, error) {
	return clusterPrefix(i, loopback(twinOctet(i), nodeOctet, 0), 24)
}

// LoopbackOf is the loopback address a pod address of the plan is served on: 10.(10+i).a.b maps
// to 127.(10+i).a.b (twinOctet). ok is false for any other address, including 10.(10+i).255.x,
// which no pod has (its loopback twin is a node's).
func LoopbackOf(pod netip.Addr) (netip.Addr, bool) {
	if !pod.Is4() {
		return netip.Addr{}, false
	}
	b := pod.As4()
	i := int(b[1]) - podOctetBase
	if b[0] != 10 || checkIndex(i) != nil || b[2] == nodeOctet {
		return netip.Addr{}, false
	}
	return loopback(twinOctet(i), int(b[2]), int(b[3])), true
}

// ServiceCIDR is cluster i's ClusterIP range, 127.(100+i).0.0/16 (kube-apiserver --service-cluster-ip-range).
func ServiceCIDR(i int) (netip.Prefix, error) {
	return clusterPrefix(i, loopback(serviceOctetBase+i, 0, 0), 16)
}

// GatewayIP is cluster i's east-west gateway address, 127.(200+i).0.1; past cluster 50,
// 127.(150+i).1.1.
func GatewayIP(i int) (netip.Addr, error) {
	if err := checkIndex(i); err != nil {
		return netip.Addr{}, err
	}
	if i > gatewaysPerOctet {
		return loopback(gatewayOctetBase+i-gatewaysPerOctet, 1, 1), nil
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
	return podAddr(podOctetBase+i, n/254, n%254+1), nil
}

// NodeIP is the address of node number node (from 0) of cluster i, 127.(10+i).255.(node+1).
func NodeIP(i, node int) (netip.Addr, error) {
	if err := checkIndex(i); err != nil {
		return netip.Addr{}, err
	}
	if node < 0 || node >= MaxNodes {
		return netip.Addr{}, fmt.Errorf("address plan: node %d of cluster %d out of range: %d nodes fit per cluster (0..%d)", node, i, MaxNodes, MaxNodes-1)
	}
	return loopback(twinOctet(i), nodeOctet, node+1), nil
}

// CheckLoopback proves the loopback address plan is usable on this host: pods, services and
// gateways live all over 127.0.0.0/8, which Linux routes to lo but macOS does not without aliases.
func CheckLoopback() error {
	gw, err := GatewayIP(1)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(gw.String(), "0"))
	if err != nil {
		return fmt.Errorf("the local provider needs all of 127.0.0.0/8 on the loopback interface, but binding %s failed: %v (on macOS add aliases, e.g. `sudo ifconfig lo0 alias %s`)", gw, err, gw)
	}
	return l.Close()
}
