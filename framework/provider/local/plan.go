package local

import (
	"fmt"
	"time"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/topology"
)

// PlanSetup estimates Create (every API server and controller-manager ready) and the CRDs
// (Established and served) for the run's time plan. Clusters start in waves; a wave of k is
// CPU-bound on 2 cores and slows with the clusters already running (their controller-managers
// and node keepers keep working). Measured with the CRD seed and controller-managers, waves of 4:
// 10 clusters in 37 s (waves of 11, 16 and 9 s); 50 clusters in 224 s (waves of 8 to 22 s);
// 3 clusters in one wave of ~10 s. Without controller-managers a wave takes about two thirds as
// long. Clusters built watched-only start in about 8 s a wave of 4 that hardly slows (25 in 53 s).
func (p *Provider) PlanSetup(t *topology.Topology, _ int) []cluster.SetupEstimate {
	n := len(t.Clusters)
	size := p.waveSize()
	perCluster, fixed, slowing := 2.0, 4.0, 0.025
	switch {
	case p.opts.NoControllers:
		perCluster, fixed = 1.3, 3.0
	case p.opts.IstiodClusters != nil:
		perCluster, fixed, slowing = 1.0, 4.0, 0.01
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
