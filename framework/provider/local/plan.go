package local

import (
	"fmt"
	"time"

	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/topology"
)

// PlanSetup estimates Create (every API server ready) and the CRDs (Established and served) for
// the run's time plan. The API servers' start is CPU-bound on 2 cores and grows faster than the
// cluster count (they share the cores and one etcd): measured with the CRD seed, 2.3 s for one,
// 15.5-17.5 s for 10 and 172-197 s for 50 API servers ready; every CRD Established 2.7, 19.5-22
// and 209-246 s after the start.
func (p *Provider) PlanSetup(t *topology.Topology, _ int) []plan.Item {
	n := float64(len(t.Clusters))
	ready := time.Duration((1 + 1.3*n + 0.055*n*n) * float64(time.Second))
	crds := time.Duration((1.5 + 0.25*n + 0.012*n*n) * float64(time.Second))
	return []plan.Item{
		{Name: "clusters", Expected: ready, Detail: fmt.Sprintf("%d API servers on one etcd", len(t.Clusters))},
		{Name: "crds", Expected: crds, Detail: "Istio and Gateway API CRDs from the seed, Established in every cluster"},
	}
}
