// Package multicluster holds the suites users run against an ambient multicluster mesh:
//
//	go test ./suites/multicluster -clusters=10
//
// TestMain builds the environment from flags (see framework/env) and the experiment's setup in it
// (framework/experiment) before any test runs: clusters, then the mesh (shared CA, east-west
// gateways), the scale workloads, istiod per primary, and the scale pods' certificates from their
// istiod's CA. Each top-level test declares what it needs of a run beside itself (planned.Add;
// mc.Begin skips it where the run lacks that). Clusters start unjoined; each test states the
// membership it needs (mc.NeedMembers), leaving it for the next test to change, and the istiod
// state its measurement needs (mc.IstiodFor), so tests run alone, in any order and under -shuffle
// with the same figures.
package multicluster

import (
	"os"
	"testing"

	"github.com/ambientmc/ambientmc/framework/ci"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
)

// planned holds each top-level test's declaration, beside the test (planned.Add): what it needs
// of a run and what it is expected to take, from its own parameters. The plan leaves out, and
// mc.Begin skips, a test whose needs the run lacks. A test of the suite's own parts (TestPlan...)
// has none and needs no environment.
var planned plan.Catalog[experiment.PlanIn]

// mc is the run every test reaches the environment, the mesh and the experiment's method through.
var mc = experiment.New(experiment.Flags, &planned)

func TestMain(m *testing.M) {
	os.Exit(mc.Main(m, ci.New())) // ci: -gates, -baseline, junit.xml, profiles, metrics.csv, $ARTIFACTS
}
