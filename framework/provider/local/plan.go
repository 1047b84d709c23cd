package local

import (
	"fmt"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// planSetup estimates Create (every API server and controller-manager ready) and the CRDs
// (Established and served) for the run's time plan. Clusters start in waves; a wave of k is
// CPU-bound on 2 cores and slows with the clusters already running (their controller-managers
// and node keepers keep working). Without controller-managers a wave is shorter, and watched-only
// clusters' waves start shorter but slow more as hundreds of idle processes share the cores (the
// waves the coefficients were fitted on: docs/suites.md#what-the-plan-is-calibrated-on).
func (p *Provider) planSetup(t *topology.Topology) []cluster.SetupEstimate {
	n := len(t.Clusters)
	size := p.waveSize()
	perCluster, fixed, slowing := 2.0, 4.0, 0.025
	switch {
	case p.opts.NoControllers:
		perCluster, fixed = 1.3, 3.0
	case p.opts.IstiodClusters != nil:
		perCluster, fixed, slowing = 1.0, 4.0, 0.035
	}
	ready := 1.0
	for first := 0; first < n; first += size {
		k := float64(min(size, n-first))
		ready += (fixed + perCluster*k) * (1 + slowing*float64(first))
	}
	c := float64(n)
	crds := 1.5 + 0.25*c + 0.012*c*c
	return []cluster.SetupEstimate{
		{Step: "clusters", Expected: time.Duration(ready * float64(time.Second)), Detail: fmt.Sprintf("%d API servers on one etcd, in waves of %d", n, size)},
		{Step: "crds", Expected: time.Duration(crds * float64(time.Second)), Detail: "Istio and Gateway API CRDs from the seed, Established in every cluster"},
	}
}
