package kind

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"sigs.k8s.io/kind/pkg/cluster/nodes"

	"github.com/ambientmc/ambientmc/framework/kindnode"
)

// loadArchives imports the emulated data plane's archive and every -kind.load archive into every
// node of cluster name, as `kind load image-archive` does (containerd's ctr import). Archives must
// be single-platform: the import runs with --all-platforms, which fails on multi-platform archives
// saved from Docker's containerd image store (kind#3795).
func (p *Provider) loadArchives(ctx context.Context, name string, ns []nodes.Node) error {
	for _, a := range p.archives() {
		for _, n := range ns {
			if err := ctx.Err(); err != nil {
				return err
			}
			start := time.Now()
			if err := kindnode.LoadArchive(n, a); err != nil {
				return fmt.Errorf("loading %s into node %s: %w (save single-platform archives: docker image save --platform linux/amd64 -o FILE IMAGE)", a, n.String(), err)
			}
			fmt.Fprintf(p.opts.Log, "ambientmc: kind: %s: loaded %s into %s in %.1fs\n", name, filepath.Base(a), n.String(), time.Since(start).Seconds())
		}
	}
	return nil
}

// archives are the archives every node gets: the data plane's, then -kind.load's.
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
