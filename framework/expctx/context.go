// Package expctx is the one experiment context below the method: the experiment's flags (join,
// latency, churn, checks, waypoints: Options, one typed value every suite shares) and Context, what
// join, the istiod checks, churn and latency read of a run. framework/experiment builds the Context
// once the mesh is installed and passes it whole; no method package keeps an option struct of its
// own. The environment's own flags (clusters, topology, provider, scale, istiods) are
// framework/env's.
package expctx

import (
	"context"
	"testing"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/workload"
)

// Context is a run as the method reads it.
type Context struct {
	// Clusters are the run's clusters, each holding Scale's workloads.
	Clusters []*cluster.Cluster
	Scale    workload.Scale
	// Mesh is the mesh installed in them: its istiods, membership, gateways and CAs.
	Mesh *mesh.Mesh
	// Observed is the cluster whose istiod the experiment measures.
	Observed *cluster.Cluster
	// Flags are the experiment's flags.
	Flags *Options
	// IstiodVersion is the istio.io/istio module version of the istiod under test ("" unknown).
	IstiodVersion string
	// RunContext outlives every test: secrets are written with it.
	RunContext func() context.Context
	// Logf writes a progress line where the person running the suite sees it.
	Logf func(format string, args ...any)
	// Profile keeps istiod's profiles now and returns their paths.
	Profile func(i *mesh.Istiod, when string) []string
	// ExtraIstiod starts a second istiod for c with extra environment, built from istio.io/istio
	// module version ("": the run's istiod), stopped when t ends (t is skipped where the provider
	// cannot run one).
	ExtraIstiod func(t *testing.T, ctx context.Context, c *cluster.Cluster, version string, env ...string) *mesh.Istiod
}
