package kind

import (
	"context"
	"fmt"
	"net/netip"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/kindnode"
	"github.com/ambientmc/ambientmc/topology"
)

// routeSharedNetworks joins the nodes of clusters that share a network with a tunnel
// (kindnode.TunnelScript) and proves it carries traffic before any workload depends on it.
func (p *Provider) routeSharedNetworks(ctx context.Context, cs []*cluster.Cluster) error {
	type member struct {
		c   *cluster.Cluster
		n   nodes.Node
		end kindnode.TunnelEnd
	}
	var ms []member
	for _, c := range cs {
		ns, err := p.kind.ListInternalNodes(kindconfig.KindName(c.Name))
		if err != nil {
			return err
		}
		ip, name, err := controlPlaneIP(ns)
		if err != nil {
			return err
		}
		n, err := kindnode.Find(ns, name)
		if err != nil {
			return err
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			return fmt.Errorf("node %s: address %q: %w", name, ip, err)
		}
		pods, err := kindconfig.PodSubnet(c.Index)
		if err != nil {
			return err
		}
		svcs, err := kindconfig.ServiceSubnet(c.Index)
		if err != nil {
			return err
		}
		ms = append(ms, member{c, n, kindnode.TunnelEnd{Index: c.Index, NodeIP: addr, Pods: pods, Services: svcs}})
	}
	peersOf := func(a member) []kindnode.TunnelEnd {
		var out []kindnode.TunnelEnd
		for _, b := range ms {
			if a.c.Name != b.c.Name && topology.RelationOf(a.c.Cluster, b.c.Cluster) == topology.SameNetwork {
				out = append(out, b.end)
			}
		}
		return out
	}
	for _, a := range ms {
		if peers := peersOf(a); len(peers) > 0 {
			if _, err := kindnode.Output(a.n, kindnode.TunnelScript(a.end, peers)); err != nil {
				return fmt.Errorf("the tunnel between clusters of network %s: %w", a.c.Network, err)
			}
		}
	}
	for _, a := range ms {
		peers := peersOf(a)
		if len(peers) == 0 {
			continue
		}
		if _, err := kindnode.Output(a.n, kindnode.TunnelCheckScript(peers, kindnode.KubeletPort)); err != nil {
			return fmt.Errorf("the tunnel between clusters of network %s carries no traffic: %w", a.c.Network, err)
		}
		fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: reaches the pod and service ranges of the %d other cluster(s) on its network %s through %s\n", a.c.Name, len(peers), a.c.Network, kindnode.TunnelDevice)
	}
	return ctx.Err()
}

// guardCounters reads how many packets each node's egress guard rejected (the chain's last rule,
// and Docker's DNS), for the log; called before the nodes are deleted.
func (p *Provider) guardCounters(names []string) []string {
	var out []string
	for _, name := range names {
		ns, err := p.kind.ListInternalNodes(name)
		if err != nil {
			continue
		}
		for _, n := range ns {
			s, err := kindnode.Output(n, "iptables -w -L AMBIENTMC-EGRESS -nvx; iptables -w -L INPUT -nvx")
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %v", n.String(), err))
				continue
			}
			out = append(out, n.String()+": "+kindnode.SummarizeGuard(s))
		}
	}
	return out
}
