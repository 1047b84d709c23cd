package kindnode

import (
	"fmt"
	"net/netip"
	"strings"
)

// Clusters on one network reach each other's pods directly, as Istio's kind_provisioner.sh makes
// them (connect_kind_clusters). That script routes the pod ranges between node containers, which
// works on kind's own network but not on the run's internal one: Docker drops bridged traffic of
// an internal network whose source or destination lies outside the network's subnet, so a packet
// to another node's pod never crosses the bridge. The nodes of clusters on one network instead
// share a VXLAN (kernel built-in, no host privilege, as flannel's vxlan backend does): pod traffic
// crosses the Docker network as UDP between node addresses, which the network carries.

const (
	// TunnelDevice is the tunnel's device in every node.
	TunnelDevice = "amc-vxlan"
	tunnelVNI    = 4242
	tunnelPort   = 4789
	// vxlanOverhead is what VXLAN over IPv4 adds to each packet (outer IP, UDP, VXLAN, Ethernet).
	vxlanOverhead = 50
	// KubeletPort listens on every address of its node: the tunnel check reaches it at the peer's
	// tunnel address, which only the tunnel routes.
	KubeletPort = 10250
)

// TunnelEnd is one node on a shared network: its address on the run network and its cluster's
// ranges.
type TunnelEnd struct {
	Index          int // the cluster's index, which picks its tunnel MAC
	NodeIP         netip.Addr
	Pods, Services netip.Prefix
}

// tunnelMAC is a locally administered MAC unique to a cluster index.
func (e TunnelEnd) tunnelMAC() string {
	return fmt.Sprintf("02:a3:c0:00:%02x:%02x", e.Index>>8&0xff, e.Index&0xff)
}

// tunnelAddr is the node's address on the tunnel: its pod range's network address, which no pod
// gets (flannel gives its vxlan device the same).
func (e TunnelEnd) tunnelAddr() netip.Addr { return e.Pods.Masked().Addr() }

// TunnelScript sets up self's end of the tunnel to peers: the device, one forwarding and neighbor
// entry per peer, routes to each peer's pod and service ranges, no masquerading between the
// shared network's pods (the peer sees the real source pod), and TCP's MSS clamped to the
// tunnel's smaller MTU. Every step replaces or checks first, so a second run changes nothing.
func TunnelScript(self TunnelEnd, peers []TunnelEnd) string {
	dev := TunnelDevice
	s := []string{
		"set -e",
		fmt.Sprintf("ip link show %s >/dev/null 2>&1 || ip link add %s type vxlan id %d dstport %d local %s nolearning",
			dev, dev, tunnelVNI, tunnelPort, self.NodeIP),
		fmt.Sprintf("ip link set %s address %s mtu $(( $(cat /sys/class/net/eth0/mtu) - %d )) up", dev, self.tunnelMAC(), vxlanOverhead),
		fmt.Sprintf("ip addr replace %s/32 dev %s", self.tunnelAddr(), dev),
	}
	for _, p := range peers {
		s = append(s,
			fmt.Sprintf("bridge fdb replace %s dev %s dst %s", p.tunnelMAC(), dev, p.NodeIP),
			fmt.Sprintf("ip neigh replace %s lladdr %s dev %s nud permanent", p.tunnelAddr(), p.tunnelMAC(), dev),
			fmt.Sprintf("ip route replace %s via %s dev %s onlink", p.Pods, p.tunnelAddr(), dev),
			fmt.Sprintf("ip route replace %s via %s dev %s onlink", p.Services, p.tunnelAddr(), dev),
			ensureRule("nat", "POSTROUTING", true, "-s", self.Pods.String(), "-d", p.Pods.String(), "-j", "RETURN"),
		)
	}
	s = append(s, ensureRule("mangle", "FORWARD", false, "-o", dev, "-p", "tcp", "--tcp-flags", "SYN,RST", "SYN", "-j", "TCPMSS", "--clamp-mss-to-pmtu"))
	return strings.Join(s, "\n")
}

// ensureRule adds an iptables rule unless it is there: first in its chain (insert) or last.
func ensureRule(table, chain string, insert bool, rule ...string) string {
	r := strings.Join(rule, " ")
	add := "-A " + chain
	if insert {
		add = "-I " + chain + " 1"
	}
	return fmt.Sprintf("iptables -w -t %s -C %s %s 2>/dev/null || iptables -w -t %s %s %s", table, chain, r, table, add, r)
}

// TunnelCheckScript proves the tunnel carries traffic to each peer: a TCP connection to the
// peer's tunnel address (port: one the peer listens on on every address).
func TunnelCheckScript(peers []TunnelEnd, port int) string {
	var s []string
	for _, p := range peers {
		s = append(s, fmt.Sprintf("timeout 5 bash -c '</dev/tcp/%s/%d' || { echo 'no TCP connection to %s:%d (cluster %d, node %s) through %s' >&2; exit 1; }",
			p.tunnelAddr(), port, p.tunnelAddr(), port, p.Index, p.NodeIP, TunnelDevice))
	}
	return strings.Join(s, "\n")
}
