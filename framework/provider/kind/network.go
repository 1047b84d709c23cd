package kind

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
)

// The LoadBalancer pools are cut from the kind docker network's IPv4 subnet, so that subnet must be
// known before anything is rendered or created. kind creates the network on its first create
// (sigs.k8s.io/kind pkg/cluster/internal/providers/docker/network.go ensureNetwork) and gives
// Docker no IPv4 subnet: Docker's IPAM picks the next free one from its default address pools
// (172.18.0.0/16 on a default daemon, but a daemon.json with small default-address-pools gives
// e.g. a /24). A network that already exists is used as it is. EnsureNetwork therefore creates
// it the same way before the first cluster, and reads what Docker chose.

// NetworkName is the docker network kind puts its nodes on: "kind", or what
// KIND_EXPERIMENTAL_DOCKER_NETWORK says, as kind's docker provider reads it.
func NetworkName() string {
	if n := os.Getenv("KIND_EXPERIMENTAL_DOCKER_NETWORK"); n != "" {
		return n
	}
	return "kind"
}

// EnsureNetwork returns the IPv4 addressing of the kind docker network, creating the network first
// (Docker.CreateNetwork) if it does not exist; created says whether it did.
func EnsureNetwork(ctx context.Context, d dockerhost.Docker) (net dockerhost.Network, created bool, err error) {
	name := NetworkName()
	net, err = d.Network(ctx, name)
	if !errors.Is(err, dockerhost.ErrNoNetwork) {
		return net, false, err
	}
	if err := d.CreateNetwork(ctx, name, netip.Prefix{}, false); err != nil {
		return dockerhost.Network{}, false, fmt.Errorf("creating docker network %s as kind would: %w", name, err)
	}
	net, err = d.Network(ctx, name)
	return net, err == nil, err
}

// checkPools says whether net has room for the pools of every cluster index up to maxIndex, and
// keeps clear of the clusters' pod and service subnets.
func checkPools(net dockerhost.Network, maxIndex int) error {
	if err := kindconfig.CheckPlan(net, maxIndex); err != nil {
		return err
	}
	_, err := kindconfig.Pools(net, maxIndex)
	return err
}
