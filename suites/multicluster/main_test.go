// Package multicluster holds the suites users run against an ambient multicluster mesh:
//
//	go test ./suites/multicluster -clusters=10
//
// TestMain builds the environment from flags (see framework/env) before any test runs: clusters,
// then the mesh (shared CA, east-west gateways), the scale workloads, istiod per primary, and the
// scale pods' certificates from their istiod's CA.
// Each top-level test declares what it needs of a run beside itself (planned.Add; begin skips it
// where the run lacks that). Clusters start unjoined; each test states the membership it needs (needMembers), leaving it for
// the next test to change, and the istiod state its measurement needs (istiodFor), so tests run
// alone, in any order and under -shuffle with the same figures.
package multicluster

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/ci"
	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/mesh"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/proxies"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/suites/multicluster/options"
)

// suite is the one value every test reaches the run through: the environment, the mesh installed
// in it, what every cluster was loaded with, the suites' flags and the data plane once started.
type suite struct {
	*env.Env
	mesh  *mesh.Mesh
	scale workload.Scale
	// workloads is the setup step that loads them.
	workloads workloads
	opts      *options.Options
	dp        dataPlaneOnce
	// proxies are the Envoy clients of the east-west gateways and waypoints.
	proxies *proxies.Set
	// planIn is what the plan was worked out from, and each test's needs are judged on.
	planIn  options.PlanIn
	planned bool
}

var mc = &suite{opts: options.Flags}

// planned holds each top-level test's declaration, beside the test (planned.Add): what it needs
// of a run and what it is expected to take, from its own parameters. The plan leaves out, and
// begin skips, a test whose needs the run lacks. A test of the suite's own parts (TestPlan...)
// has none and needs no environment.
var planned plan.Catalog[options.PlanIn]

// begin starts top-level test t as its declaration says: skipped with the reason of the first
// need the run lacks, else with its context.
func (s *suite) begin(t *testing.T) context.Context {
	t.Helper()
	require.True(t, s.planned, "%s: the run was not planned", t.Name())
	why, declared := planned.Unmet(t.Name(), s.planIn)
	require.True(t, declared, "%s declares nothing: var _ = planned.Add(%q, needs, item) beside it", t.Name(), t.Name())
	if why != "" {
		t.Skip(why)
	}
	return s.Context(t)
}

func TestMain(m *testing.M) {
	os.Exit(env.Run(m, &mc.Env, env.Suite{
		Check: mc.opts.Validate,
		CI:    ci.New(), // -gates, -baseline, junit.xml, profiles, metrics.csv, $ARTIFACTS
		Steps: []env.Step{
			{Name: "mesh", Run: installMesh},
			{Name: "workloads", Each: mc.workloads.each, Run: mc.workloads.report},
			{Name: "istiod", Run: startIstiods},
			{Name: "certificates", Run: serveFakeNodes},
		},
		Plan: func(in env.PlanInput) (steps, tests []plan.Item) {
			mc.planIn, mc.planned = mc.opts.PlanIn(in), true
			return mc.opts.Plan(in, &planned)
		},
		Planned: planned.Names(),
	}))
}
