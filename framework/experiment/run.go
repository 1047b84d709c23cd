// Package experiment is the ambient multicluster experiment as a library, for any suite to script:
// the mesh set up in an environment (Steps: the mesh, the scale workloads, istiod per primary with
// its gateways' Envoy clients, the scale pods' certificates), the mesh's membership and the
// measured istiod's state (NeedMembers, IstiodFor), the join sequence (MeasureJoins), churn
// (StartChurn), the istiod checks' run (Checks), and the data-plane probes with their latency runs
// (DataPlane, Fortio). A suite holds one Run for its package, declares each test once in a
// plan.Catalog, and starts every test with Begin.
package experiment

import (
	"context"
	"flag"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/proxies"
)

// Flags holds the values of the experiment's flags, registered on the default flag set so that
// `go test ./suites/multicluster -join.timeout=3m` works as written. They are registered here, not
// in framework/expctx, which the method imports: a program using the method alone
// (scripts/bins) keeps its own flags.
var Flags = expctx.Register(flag.CommandLine)

// Run is the one value a suite reaches its run through: the environment, the mesh installed in
// it, the experiment's flags, the gateways' and waypoints' Envoy clients and, once started, the
// data plane's probes.
type Run struct {
	*env.Env
	Mesh *mesh.Mesh
	Opts *expctx.Options
	// Proxies are the Envoy clients of the east-west gateways and waypoints.
	Proxies *proxies.Set
	// PlanIn is what the plan was worked out from, and each test's needs are judged on.
	PlanIn PlanIn

	catalog *plan.Catalog[PlanIn]
	planned bool
	x       struct {
		once sync.Once
		c    *expctx.Context
	}
	workloads workloads
	dp        dataPlaneOnce
}

// New is the run of a suite whose tests are declared in catalog, with the experiment's flags o.
func New(o *expctx.Options, catalog *plan.Catalog[PlanIn]) *Run {
	return &Run{Opts: o, catalog: catalog}
}

// Main builds the environment and the mesh in it, runs the suite's tests and tears everything
// down: a suite's TestMain is os.Exit(r.Main(m, ci)). ci is what CI adds to the lifecycle
// (framework/ci), or nil.
func (r *Run) Main(m *testing.M, ci env.Extension) int {
	return env.Run(m, &r.Env, env.Suite{
		Check: r.Opts.Validate,
		CI:    ci,
		Steps: r.Steps(),
		Plan: func(in env.PlanInput) (steps, tests []plan.Item) {
			r.PlanIn, r.planned = PlanInOf(r.Opts, in), true
			return PlanOf(r.Opts, in, r.catalog)
		},
		Planned: r.catalog.Names(),
	})
}

// Steps are the experiment's setup steps, after the environment's clusters.
func (r *Run) Steps() []env.Step {
	return []env.Step{
		{Name: "mesh", Run: r.installMesh},
		{Name: "workloads", Each: r.workloads.each, Run: r.workloads.report},
		{Name: "istiod", Run: r.startIstiods},
		{Name: "certificates", Run: r.serveFakeNodes},
	}
}

// Experiment is the experiment context the method reads (framework/expctx): the run's clusters,
// scale, mesh, observed cluster and flags, built once, after setup.
func (r *Run) Experiment() *expctx.Context {
	r.x.once.Do(func() {
		version := ""
		if r.Istiod != nil {
			version = r.Istiod.ModuleVersion
		}
		r.x.c = &expctx.Context{
			Clusters: r.Clusters, Scale: r.Scale, Mesh: r.Mesh, Observed: r.ObservedCluster(), Flags: r.Opts,
			IstiodVersion: version, RunContext: r.RunContext, Logf: r.Logf, ExtraIstiod: r.ExtraIstiod,
			Profile: func(i *mesh.Istiod, when string) []string { return r.Profile(i, when) },
		}
	})
	return r.x.c
}

// Begin starts top-level test t as its declaration in the catalog says: skipped with the reason of
// the first need the run lacks, else with its context.
func (r *Run) Begin(t *testing.T) context.Context {
	t.Helper()
	require.True(t, r.planned, "%s: the run was not planned", t.Name())
	why, declared := r.catalog.Unmet(t.Name(), r.PlanIn)
	require.True(t, declared, "%s declares nothing: var _ = planned.Add(%q, needs, item) beside it", t.Name(), t.Name())
	if why != "" {
		t.Skip(why)
	}
	return r.Context(t)
}

// ObservedCluster is the cluster whose istiod the experiment measures (-observe, else the first
// primary; the environment checked the flag before anything started).
func (r *Run) ObservedCluster() *cluster.Cluster {
	tc, err := r.Observed()
	if err != nil {
		panic(err) // checked before anything started
	}
	return r.Cluster(tc.Name)
}

// EveryCluster is every cluster's name, the observed one first.
func (r *Run) EveryCluster() []string {
	obs := r.ObservedCluster().Name
	names := []string{obs}
	for _, c := range r.Clusters {
		if c.Name != obs {
			names = append(names, c.Name)
		}
	}
	return names
}
