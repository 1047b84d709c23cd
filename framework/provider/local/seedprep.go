package local

import (
	"context"
	"fmt"
	"os"

	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/topology"
)

// PrepareCRDSeed makes sure the CRD seeds for set exist beside the cached kube-apiserver: the
// whole clusters' and the watched-only clusters' (crds.Set.WhereNoIstiod, what a run with only the
// observed istiod gives the clusters it merely watches). For those missing it starts two clusters,
// the first whole and the second watched-only, creates each one's CRDs through its API, waits until
// they are Established and captures the seeds. `make bins` calls it, so a newcomer's first run,
// at 100 clusters too, starts from seeds like every later run. It reports whether a seed was written.
func PrepareCRDSeed(ctx context.Context, opts Options, set crds.Set) (bool, error) {
	dir, err := os.MkdirTemp("", "ambientmc-crd-seed-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	opts.RunDir = dir
	return New(opts).prepareSeeds(ctx, set)
}

func (p *Provider) prepareSeeds(ctx context.Context, set crds.Set) (bool, error) {
	topo, err := topology.Generate(2)
	if err != nil {
		return false, err
	}
	p.opts.IstiodClusters = []string{topo.Clusters[0].Name} // the second is watched-only
	// Only the binaries: a seed needs two API servers, whatever the host's memory says of a run.
	if err := p.ensureBinaries(ctx); err != nil {
		return false, err
	}
	objs, err := p.PreloadCRDs(set)
	if err != nil {
		return false, err
	}
	if p.seededBoth() {
		return false, nil
	}
	defer p.Destroy(context.Background())
	cs, err := p.Create(ctx, topo)
	if err != nil {
		return false, fmt.Errorf("CRD seed: %w", err)
	}
	for _, c := range cs {
		apply := crds.Set(objs)
		if p.watchedOnly(c.Name) {
			apply = apply.WhereNoIstiod()
		}
		if err := crds.Apply(ctx, c.Dynamic, apply); err != nil {
			return false, fmt.Errorf("CRD seed: cluster %s: %w", c.Name, err)
		}
		if err := p.SaveCRDSeed(ctx, c); err != nil { // a no-op for a seed that existed
			return false, fmt.Errorf("CRD seed: cluster %s: %w", c.Name, err)
		}
	}
	return true, nil
}
