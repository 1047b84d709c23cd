package kind

import (
	"context"
	"fmt"
	"os"

	"github.com/ambientmc/ambientmc/framework/dockerhost"
	"github.com/ambientmc/ambientmc/framework/localregistry"
)

// planRunNetwork picks the run network's name and subnet (before any cluster exists).
func (p *Provider) planRunNetwork(ctx context.Context) (dockerhost.Network, error) {
	used, err := p.docker.Subnets(ctx)
	if err != nil {
		return dockerhost.Network{}, fmt.Errorf("listing Docker networks: %w", err)
	}
	sub, err := dockerhost.ChooseSubnet(append(used, dockerhost.HostRoutes()...))
	if err != nil {
		return dockerhost.Network{}, err
	}
	return dockerhost.Network{Subnet: sub}, nil
}

// createRunNetwork creates the run network and points kind at it (kind reads the variable at
// each create). It holds off Destroy meanwhile, and refuses once Destroy began: a network
// created while Destroy ran would be left behind.
func (p *Provider) createRunNetwork(ctx context.Context) error {
	p.destroying.Lock()
	defer p.destroying.Unlock()
	p.mu.Lock()
	name, net, made, closed := p.netName, p.net, p.netCreated, p.closed
	p.mu.Unlock()
	if closed {
		return errStopped
	}
	if made {
		return nil
	}
	if !net.Subnet.IsValid() { // no preflight ran
		planned, err := p.planRunNetwork(ctx)
		if err != nil {
			return err
		}
		net = planned
		p.mu.Lock()
		p.net = planned
		p.mu.Unlock()
	}
	if err := p.docker.CreateNetwork(ctx, name, net.Subnet, true); err != nil {
		return fmt.Errorf("creating the run's internal docker network %s (%s): %w", name, net.Subnet, err)
	}
	p.mu.Lock()
	p.netCreated = true
	p.mu.Unlock()
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: created the internal docker network %s (%s): no route beyond this host\n", name, net.Subnet)
	return os.Setenv("KIND_EXPERIMENTAL_DOCKER_NETWORK", name)
}

// removeRunNetwork removes the run network, once every node is gone.
func (p *Provider) removeRunNetwork(ctx context.Context) error {
	p.mu.Lock()
	name, made := p.netName, p.netCreated
	p.netCreated = false
	p.mu.Unlock()
	if !made {
		return nil
	}
	// The run's registry (-kind.registry) goes with its network, which it would hold otherwise.
	ids, err := p.docker.LabelledContainers(ctx, localregistry.Label+"="+name)
	if err == nil && len(ids) > 0 {
		err = p.docker.RemoveContainers(ctx, ids)
	}
	if err != nil {
		return fmt.Errorf("removing the run's registry: %w", err)
	}
	if err := p.docker.RemoveNetwork(ctx, name); err != nil {
		return fmt.Errorf("docker network rm %s: %w", name, err)
	}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: removed the docker network %s\n", name)
	return nil
}
