package local

import (
	"context"
	"fmt"
	"os"

	"github.com/ambientmc/ambientmc/framework/mesh/crds"
	"github.com/ambientmc/ambientmc/topology"
)

// PrepareCRDSeed makes sure the CRD seed for set exists beside the cached kube-apiserver: if not,
// it starts one cluster, creates the CRDs through its API, waits until they are Established and
// captures the seed. `make bins` calls it, so a newcomer's first run starts from a seed like every
// later run. It reports whether a seed was written.
func PrepareCRDSeed(ctx context.Context, opts Options, set crds.Set) (bool, error) {
	dir, err := os.MkdirTemp("", "ambientmc-crd-seed-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	opts.RunDir = dir
	p := New(opts)
	topo, err := topology.Generate(1)
	if err != nil {
		return false, err
	}
	// Only the binaries: a seed needs one API server, whatever the host's memory says of a run.
	if err := p.ensureBinaries(ctx); err != nil {
		return false, err
	}
	objs, err := p.PreloadCRDs(set)
	if err != nil {
		return false, err
	}
	if p.SeededCRDs() {
		return false, nil
	}
	defer p.Destroy(context.Background())
	cs, err := p.Create(ctx, topo)
	if err != nil {
		return false, fmt.Errorf("CRD seed: %w", err)
	}
	if err := crds.Apply(ctx, cs[0].Dynamic, objs); err != nil {
		return false, fmt.Errorf("CRD seed: %w", err)
	}
	if err := p.SaveCRDSeed(ctx, cs[0]); err != nil {
		return false, fmt.Errorf("CRD seed: %w", err)
	}
	return true, nil
}
