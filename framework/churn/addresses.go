package churn

import (
	"fmt"
	"net/netip"

	"github.com/ambientmc/ambientmc/framework/workload"
)

// allocIP takes node's next free address past the scale pods', wrapping around at the end of the
// plan or the node's podCIDR, so a freed address is reused as late as possible.
func (p *Pods) allocIP(node int) (netip.Addr, error) {
	wrapped := false
	for {
		j := p.nextOn[node]
		ip, err := workload.PodIP(p.c, p.nodes[node], node, j, p.scale.Nodes)
		if err != nil {
			if wrapped || j == p.firstOn {
				return netip.Addr{}, fmt.Errorf("cluster %s: no free pod address on %s for a replacement: %w", p.c.Name, workload.NodeName(node), err)
			}
			p.nextOn[node], wrapped = p.firstOn, true
			continue
		}
		p.nextOn[node]++
		if !p.usedIPs[ip] {
			p.usedIPs[ip] = true
			return ip, nil
		}
	}
}
