// Package quickstart is the smallest suite on the experiment's library (framework/experiment):
// one cluster joins another while their istiod is measured, then a client calls a service in its
// own cluster and one in the other cluster, on new and reused connections.
//
//	go test ./suites/quickstart                    # 2 clusters, each on its own network
//	go test ./suites/quickstart -provider=kind     # the same on kind clusters
package quickstart

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/ci"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/probe"
	"github.com/ambientmc/ambientmc/framework/report"
)

var (
	planned plan.Catalog[experiment.PlanIn]
	mc      = experiment.New(experiment.Flags, &planned)
)

func TestMain(m *testing.M) { os.Exit(mc.Main(m, ci.New())) }

var _ = planned.Add("TestJoin", []plan.Need[experiment.PlanIn]{experiment.NeedTwoClusters}, func(in experiment.PlanIn) plan.Item {
	return plan.Item{Expected: experiment.S(in.Restart + 6 + in.Joins(in.Remotes) + in.DataPlane), Detail: fmt.Sprintf("baseline + %d joins", in.Remotes)}
})

// TestJoin joins the other clusters to the observed one, one at a time, and measures what each
// costs its istiod (experiment.MeasureJoins).
func TestJoin(t *testing.T) {
	ctx := mc.Begin(t)
	mc.ProbesInPlace(t)
	cp := mc.MeasureJoins(t, ctx)
	require.Len(t, cp.Joins, len(mc.Clusters)-1, "every other cluster joined")
	for _, j := range cp.Joins {
		assert.Positive(t, *j.ConvergenceSeconds, "%s converged after its secret was written", j.Cluster)
	}
	assert.Positive(t, cp.PerRemoteCluster.LiveHeapBytes.Value, "a remote cluster costs istiod live heap")
}

var _ = planned.Add("TestLatency", experiment.DataPlaneNeeds, func(in experiment.PlanIn) plan.Item {
	runs := 4 * (in.O.Latency.Duration.Seconds() + 0.2)
	return plan.Item{Expected: experiment.S(in.DataPlane + 4*2.1 + runs), Detail: "rate search, 4 runs"}
})

// TestLatency calls a service in the client's cluster and one in the farthest other cluster (on
// another network where the topology has one: double HBONE through its east-west gateway), each on
// new and on reused connections, at the rate the host carries; every request must succeed and
// reach the cluster it was sent to.
func TestLatency(t *testing.T) {
	ctx := mc.Begin(t)
	p := mc.DataPlane(t, ctx)
	all := p.LatencyPaths()
	paths := []experiment.LatencyPath{all[0], all[len(all)-1]} // local, and the farthest
	lat := &report.Latency{RateSearch: mc.LatencyRate(t, ctx, p, paths[1])}
	for _, conns := range []string{report.ConnNew, report.ConnReused} {
		for _, path := range paths {
			t.Run(path.Name+"/"+conns, func(t *testing.T) {
				before := p.Counters(t, ctx)
				run := mc.Fortio(t, ctx, p, lat.RateSearch.QPS, probe.Load{App: path.App}, path.Name, conns)
				after := p.Counters(t, ctx)
				require.Positive(t, run.Requests)
				assert.Zero(t, run.Errors, "every request succeeds")
				assert.Equal(t, mc.Reached(after, conns, run.Requests), experiment.Served(after, path.At, path.App)-experiment.Served(before, path.At, path.App),
					"every request (and fortio's warm-up call per connection) reached %s", experiment.Describe(path.At, path.App))
				lat.Runs = append(lat.Runs, run)
			})
		}
	}
	mc.ConcludeLatency(t, lat, lat.RateSearch.QPS)
}
