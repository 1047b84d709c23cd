package kind

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/kindconfig"
	"github.com/ambientmc/ambientmc/framework/metallb"
)

// loadBalancers cuts one pool per cluster from the kind network and installs MetalLB with it.
func (p *Provider) loadBalancers(ctx context.Context, cs []*cluster.Cluster) error {
	p.mu.Lock()
	net := p.net
	p.mu.Unlock()
	if err := kindconfig.CheckPlan(net, len(cs)); err != nil {
		return err
	}
	maxIndex := 0
	for _, c := range cs {
		maxIndex = max(maxIndex, c.Index)
	}
	pools, err := kindconfig.Pools(net, maxIndex)
	if err != nil {
		return err
	}
	sem := make(chan struct{}, p.opts.Parallel)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range cs {
		g.Go(func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			pool := pools[c.Index-1]
			start := time.Now()
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: installing MetalLB with pool %s (cut from the run network %s)\n", c.Name, pool, net.Subnet)
			if err := p.lb(gctx, c, pool); err != nil {
				return err
			}
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: MetalLB pool %s ready in %.1fs\n", c.Name, pool, time.Since(start).Seconds())
			return nil
		})
	}
	return g.Wait()
}

func (p *Provider) installMetalLB(ctx context.Context, c *cluster.Cluster, pool netip.Prefix) error {
	manifest, err := metallb.Manifest(ctx)
	if err != nil {
		return err
	}
	return metallb.Install(ctx, c, manifest, pool, 3*time.Minute)
}
