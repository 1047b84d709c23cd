package kind

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/localregistry"
	"github.com/ambientmc/ambientmc/framework/nodeimages"
)

// loadArchives imports into every node of cluster name the emulated data plane's archive, every
// -kind.load archive and the images found only in Docker's image store (nodeimages), or, with
// the run's registry, points the node's containerd at it for those.
func (p *Provider) loadArchives(ctx context.Context, name string, ns []nodes.Node) error {
	archives := p.archives()
	if p.registry != nil {
		if err := p.registry.Mirror(ns, p.store.Wanted()); err != nil {
			return err
		}
	} else {
		stored, err := p.store.Archive(ctx)
		if err != nil {
			return err
		}
		if stored != "" {
			archives = append(archives, stored)
		}
	}
	return nodeimages.Load(ctx, p.opts.Log, name, ns, archives)
}

// startRegistry starts the run's registry (-kind.registry) and pushes the images only Docker's
// image store holds into it.
func (p *Provider) startRegistry(ctx context.Context) error {
	start := time.Now()
	r, err := localregistry.Start(ctx, p.docker, p.opts.Built.Registry, p.netName)
	if err != nil {
		return err
	}
	p.registry = r
	refs := p.store.Wanted()
	if len(refs) > 0 {
		archive, err := p.store.Archive(ctx)
		if err != nil {
			return err
		}
		if err := r.Push(ctx, archive, refs); err != nil {
			return err
		}
		p.store.Remove()
	}
	fmt.Fprintf(p.opts.Log, "ambientmc: kind: registry %s at %s on %s in %.1fs, holding %d images of Docker's image store (%s)\n",
		p.opts.Built.Registry, r.Addr, p.netName, time.Since(start).Seconds(), len(refs), strings.Join(refs, ", "))
	return nil
}

// archives are the archive files every node gets: the data plane's, then -kind.load's.
func (p *Provider) archives() []string {
	if p.opts.DataPlane == "" {
		return p.opts.Load
	}
	return append([]string{p.opts.DataPlane}, p.opts.Load...)
}

// freePorts returns n distinct free loopback ports for the API servers. kind's own choice
// releases the port before docker binds it, so parallel creates in one process could pick the
// same one; holding all n listeners until every port is known rules that out.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("choosing API server ports: %w", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}
