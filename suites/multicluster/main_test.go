// Package multicluster holds the suites users run against an ambient multicluster mesh:
//
//	go test ./suites/multicluster -clusters=10
//
// TestMain builds the environment from flags (see framework/env) before any test runs: clusters,
// then the mesh (shared CA, east-west gateways), the scale workloads, istiod per primary, and the
// scale pods' certificates from their istiod's CA.
// Clusters start unjoined; each test states the membership it needs (needMembers), leaving it for
// the next test to change, and the istiod state its measurement needs (istiodFor), so tests run
// alone, in any order and under -shuffle with the same figures.
package multicluster

import (
	"os"
	"testing"

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
}

var mc = &suite{opts: options.Flags}

// planned holds each top-level test's plan item, declared beside the test (planned.Add): what it
// is expected to take, from its own parameters. A test of the suite's own parts (TestPlan...) has
// none and needs no environment.
var planned plan.Catalog[options.PlanIn]

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
		Plan:    func(in env.PlanInput) (steps, tests []plan.Item) { return mc.opts.Plan(in, &planned) },
		Planned: planned.Names(),
	}))
}
