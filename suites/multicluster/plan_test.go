package multicluster

import (
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/experiment"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/workload"
	"github.com/ambientmc/ambientmc/topology"
)

// The TestPlan tests check the suite's time plan. They are declared in no plan themselves, so
// `go test ./suites/multicluster -run '^TestPlan'` (make test) sets nothing up and runs in a
// second.

// planWith is the suite's plan for n clusters at scale with the flags args.
func planWith(t *testing.T, n int, scale string, args ...string) (*expctx.Options, []plan.Item, []plan.Item) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o := expctx.Register(fs)
	require.NoError(t, fs.Parse(args))
	require.NoError(t, o.Validate())
	topo, err := topology.Generate(n)
	require.NoError(t, err)
	sc, err := workload.Resolve(scale, 0, 0)
	require.NoError(t, err)
	steps, tests := experiment.PlanOf(o, env.PlanInput{Topology: topo, Scale: sc, Provider: "local", DataPlane: "emulated", Istiods: n}, &planned)
	return o, steps, tests
}

// itemOf is the item of test name.
func itemOf(t *testing.T, items []plan.Item, name string) plan.Item {
	t.Helper()
	for _, it := range items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no %s in the plan", name)
	return plan.Item{}
}

// Every top-level test declares its plan item beside itself and starts with mc.Begin
// (experiment.DeclaredTests); the TestPlan tests declare none (they need no environment).
func TestPlanItemsStandBesideTheirTests(t *testing.T) {
	tests := experiment.DeclaredTests(t)
	assert.ElementsMatch(t, tests, planned.Names(), "every declared item is a test of this package")
	_, _, items := planWith(t, 3, "small")
	for _, it := range items {
		assert.Positive(t, it.Expected, it.Name)
	}
	assert.Len(t, items, len(tests), "at 3 clusters every test runs")
}

// The main command's defaults leave a third of go test's default -timeout=10m: 10 clusters at
// small scale, with the clusters' ~40 s the provider plans besides these items (the budget is five
// minutes: docs/measurements.md#the-main-command-at-10-clusters).
func TestPlanDefaultAtTenClustersLeavesAThirdOfTheTimeout(t *testing.T) {
	_, steps, tests := planWith(t, 10, "small")
	p := plan.Plan{Setup: steps, Tests: tests}
	assert.Less(t, p.Total()+40*time.Second, 10*time.Minute*2/3, "the suites' part and the clusters:\n%s", p.Table())
}

// Work that grows with the cluster count is bounded: churn and the memory check do not grow with
// it, so doubling the clusters adds about the joins and leaves, not a multiple of everything.
func TestPlanGrowsWithJoinsOnly(t *testing.T) {
	_, _, at10 := planWith(t, 10, "small")
	_, _, at50 := planWith(t, 50, "small")
	checks := itemOf(t, at50, "TestIstiodProperties").Expected - itemOf(t, at10, "TestIstiodProperties").Expected
	assert.Less(t, checks, 5*time.Second, "the memory check joins -checks.clusters; only the probes' deployment grows")
	growth := itemOf(t, at50, "TestChurn").Expected - itemOf(t, at10, "TestChurn").Expected
	assert.Less(t, growth, 40*time.Second, "churn grows by its joins and per-window drains only")
}

// A join costs more the more clusters istiod already holds and the more idle clusters share the
// host: 100 small clusters' 99 joins took 1420 s on the reference host (docs/suites.md), three
// times 99 first joins; a plan below that would let a run start that its -timeout cannot hold.
func TestPlanJoinsGrowWithTheClustersAlreadyJoined(t *testing.T) {
	_, _, at10 := planWith(t, 10, "small")
	_, _, at100 := planWith(t, 100, "small")
	joins10, joins100 := itemOf(t, at10, "TestControlPlaneJoin"), itemOf(t, at100, "TestControlPlaneJoin")
	assert.GreaterOrEqual(t, joins100.Expected, 1420*time.Second, joins100.Detail)
	assert.Less(t, joins100.Expected, 2*1420*time.Second, joins100.Detail)
	assert.Less(t, joins10.Expected, 70*time.Second, "10 clusters' joins barely grow: %s", joins10.Detail)
	assert.Contains(t, joins100.Detail, "per cluster already joined")
}

func TestPlanChurnTrimSaysWhichFlagRestoresIt(t *testing.T) {
	o, _, tests := planWith(t, 3, "small", "-churn.rates=2,5,20,50", "-churn.duration=20s")
	it := itemOf(t, tests, "TestChurn")
	require.NotNil(t, it.Trim)
	short, warning := it.Trim()
	assert.Less(t, short.Expected, it.Expected)
	assert.Equal(t, []float64{50}, o.Churn.Rates, "the trim changes what the test runs")
	assert.Equal(t, 10*time.Second, o.Churn.Duration)
	assert.Contains(t, warning, "-churn.rates=2,5,20,50 -churn.duration=20s")
	assert.Contains(t, warning, "make e2e")
}

func TestPlanCountsEveryJoinSequence(t *testing.T) {
	_, _, one := planWith(t, 3, "small")
	_, _, three := planWith(t, 3, "small", "-join.repeats=3")
	assert.Greater(t, itemOf(t, three, "TestControlPlaneJoin").Expected, 5*itemOf(t, one, "TestControlPlaneJoin").Expected/2,
		"three sequences on fresh istiods take about three times one")
}

// Where the run lacks what a test declares it needs (a second istiod, a data plane, two
// clusters) the plan leaves the test out and the test skips with the same reason.
func TestPlanLeavesOutWhatSkips(t *testing.T) {
	_, _, tests := planWith(t, 3, "small")
	itemOf(t, tests, "TestLatency")
	topo, err := topology.Generate(3)
	require.NoError(t, err)
	sc, err := workload.Resolve("small", 0, 0)
	require.NoError(t, err)
	for _, c := range []struct {
		in   env.PlanInput
		left []string
		why  string
	}{
		{env.PlanInput{Topology: topo, Scale: sc, Provider: "local", DataPlane: "emulated", Istiods: 1},
			[]string{"TestLatency", "TestFailover", "TestDataPlaneSecurity"}, experiment.NeedTwoIstiods.Skip},
		{env.PlanInput{Topology: topo, Scale: sc, Provider: "kube", DataPlane: report.DataPlaneNone, Istiods: 3},
			[]string{"TestLatency", "TestFailover", "TestDataPlaneSecurity"}, experiment.NeedDataPlane.Skip},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		o := expctx.Register(fs)
		_, items := experiment.PlanOf(o, c.in, &planned)
		for _, it := range items {
			assert.NotContains(t, c.left, it.Name, "planned with %d istiods and data plane %s", c.in.Istiods, c.in.DataPlane)
		}
		for _, name := range c.left {
			why, declared := planned.Unmet(name, experiment.PlanInOf(o, c.in))
			assert.True(t, declared, name)
			assert.Equal(t, c.why, why, "%s skips with the reason the plan left it out for", name)
		}
	}
	one, err := topology.Generate(1)
	require.NoError(t, err)
	in := env.PlanInput{Topology: one, Scale: sc, Provider: "local", DataPlane: "emulated", Istiods: 1}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o := expctx.Register(fs)
	_, items := experiment.PlanOf(o, in, &planned)
	for _, it := range items {
		assert.NotEqual(t, "TestIstiodProperties", it.Name, "planned at one cluster")
	}
	why, _ := planned.Unmet("TestIstiodProperties", experiment.PlanInOf(o, in))
	assert.Equal(t, experiment.NeedTwoClusters.Skip, why)
}
