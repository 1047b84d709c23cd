package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/metallb"
	"github.com/ambientmc/ambientmc/framework/provider/kind"
	"github.com/ambientmc/ambientmc/topology"
)

// newDocker is the docker CLI; tests replace it.
var newDocker = dockerhost.NewDocker

// kindNetwork is the kind docker network the MetalLB pools are cut from, and how render knows it:
// -kind.subnet; the live network (created first with -kind.create-network, as kind's first create
// would: Docker then picks the subnet); or, with no network to read, Docker's usual first pool.
func kindNetwork(o *options) (dockerhost.Network, string, error) {
	if o.kindSubnetSet {
		p, err := netip.ParsePrefix(o.kindSubnet)
		if err != nil {
			return dockerhost.Network{}, "", fmt.Errorf("-kind.subnet=%s: %v (want a CIDR such as %s)", o.kindSubnet, err, kindconfig.DefaultNetworkSubnet)
		}
		return dockerhost.Network{Subnet: p.Masked()}, "given by -kind.subnet", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, name := newDocker(), kind.NetworkName()
	if o.createNetwork {
		net, created, err := kind.EnsureNetwork(ctx, d)
		if err != nil {
			return dockerhost.Network{}, "", fmt.Errorf("-kind.create-network: docker network %s: %w", name, err)
		}
		if created {
			return net, "docker network " + name + ", created now as kind would create it; Docker chose the subnet", nil
		}
		return net, "docker network inspect " + name, nil
	}
	net, err := d.Network(ctx, name)
	fallback := dockerhost.Network{Subnet: netip.MustParsePrefix(kindconfig.DefaultNetworkSubnet)}
	switch {
	case err == nil:
		return net, "docker network inspect " + name, nil
	case errors.Is(err, dockerhost.ErrNoNetwork):
		return fallback, "assumed, Docker's usual first address pool: no docker network " + name + " exists yet, and Docker may give it another subnet when it is created; pass -kind.create-network to create it now, or -kind.subnet", nil
	default:
		return fallback, fmt.Sprintf("assumed, Docker's usual first address pool: no Docker to ask (%v); the kind provider checks the real subnet in its preflight", err), nil
	}
}

// writeKindConfig writes cluster c's kind config (kindconfig.Config: its own pod and service
// subnets, kubeadm patches for the node image) and its MetalLB pool into dir. It returns the paths
// written.
func writeKindConfig(c topology.Cluster, dir, image string, pool netip.Prefix) ([]string, error) {
	cfg, err := kindconfig.Config(c, kindconfig.Node{Image: image})
	if err != nil {
		return nil, err
	}
	data, err := kindconfig.ConfigYAML(cfg)
	if err != nil {
		return nil, err
	}
	lb, err := metallb.YAML(pool)
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

// kindPools cuts one pool per cluster index from net, as the kind provider does, refusing a
// network without room for all of them or overlapping the clusters' own ranges.
func kindPools(t *topology.Topology, net dockerhost.Network) ([]netip.Prefix, error) {
	maxIndex := 0
	for _, tc := range t.Clusters {
		maxIndex = max(maxIndex, tc.Index)
	}
	if err := kindconfig.CheckPlan(net, maxIndex); err != nil {
		return nil, err
	}
	return kindconfig.Pools(net, maxIndex)
}
