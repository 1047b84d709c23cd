package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/ambientmc/ambientmc/framework/provider/kind"
	"github.com/ambientmc/ambientmc/topology"
)

// writeKindConfig writes cluster c's kind config (kind.Config: its own pod and service subnets,
// kubeadm patches for the node image) and its MetalLB pool, cut from subnet as the kind provider
// cuts it from the kind docker network, into dir. It returns the paths written.
func writeKindConfig(t *topology.Topology, c topology.Cluster, dir, image, subnet string) ([]string, error) {
	cfg, err := kind.Config(c, kind.Options{Image: image})
	if err != nil {
		return nil, err
	}
	data, err := kind.ConfigYAML(cfg)
	if err != nil {
		return nil, err
	}
	net, err := netip.ParsePrefix(subnet)
	if err != nil {
		return nil, fmt.Errorf("-kind.subnet=%s: %v (want a CIDR such as %s)", subnet, err, kind.DefaultNetworkSubnet)
	}
	maxIndex := 0
	for _, tc := range t.Clusters {
		maxIndex = max(maxIndex, tc.Index)
	}
	pools, err := kind.Pools(kind.Network{Subnet: net.Masked()}, maxIndex)
	if err != nil {
		return nil, err
	}
	lb, err := kind.MetalLBYAML(pools[c.Index-1])
	if err != nil {
		return nil, err
	}
	cfgPath, lbPath := filepath.Join(dir, "kind-config.yaml"), filepath.Join(dir, "metallb-pool.yaml")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(lbPath, lb, 0o644); err != nil {
		return nil, err
	}
	return []string{cfgPath, lbPath}, nil
}
