package experiment

import (
	"fmt"
	"time"

	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/expctx"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
)

// The suites' time plan: the setup steps here, and each top-level test's item beside the test
// (a plan.Catalog[PlanIn] in the suite). The coefficients are per unit of work on the 2-core
// reference host with the local provider's emulated data plane; what they were calibrated on is
// in docs/suites.md#what-the-plan-is-calibrated-on. Real clusters' joins and installs take longer,
// and their figures are scaled by realClusterFactor.

// S is seconds as a Duration.
func S(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// realClusterFactor stretches the local provider's figures for real clusters (port-forwards,
// image pulls, real ztunnels).
const realClusterFactor = 3

// PlanIn is what a test's plan item is worked out from: the run's input, the suites' flags, and
// the figures several items share.
type PlanIn struct {
	env.PlanInput
	O *expctx.Options
	// N is the clusters, Remotes the clusters a join suite joins, Pods the pods per cluster.
	N, Remotes int
	Pods       float64
	// Join is one join's seconds at this scale (convergence, the burst, the quiet steady window,
	// three samples and a forced GC; istiod's own work grows with the pods a cluster brings).
	Join float64
	// JoinGrowth is the seconds each cluster already joined adds to a join: istiod pushes the
	// clusters it holds on every join, on a host that the run's idle clusters keep busier the
	// more there are (docs/suites.md#what-the-plan-is-calibrated-on).
	JoinGrowth float64
	// Restart is a restart for a fresh istiod (it lists its own cluster again).
	Restart float64
	// DataPlane is the probes' deployment in every cluster, once, and a fresh client per test;
	// DataPlaneRuns says the data-plane suites run (DataPlaneNeeds are met).
	DataPlane     float64
	DataPlaneRuns bool
	// k stretches every item for real clusters.
	k float64
}

// PlanInOf works out the shared figures of in under the flags o.
func PlanInOf(o *expctx.Options, in env.PlanInput) PlanIn {
	n := len(in.Topology.Clusters)
	pi := PlanIn{PlanInput: in, O: o, N: n, Remotes: max(n-1, 0), Pods: float64(in.Scale.Pods), k: 1}
	if in.DataPlane != report.DataPlaneEmulated {
		pi.k = realClusterFactor
	}
	pi.Join = 1.6 + 2.0 + 0.7 + 0.2 + pi.Pods/4000*6
	if o.Join.Settle > 0 {
		pi.Join = 0.6 + o.Join.Settle.Seconds() + 0.7 + pi.Pods/4000*2
	}
	pi.JoinGrowth = 0.002 * float64(n)
	pi.Restart = 3 + pi.Pods/1000
	pi.DataPlane = 2.0 + 0.1*float64(n)
	pi.DataPlaneRuns = plan.Unmet(pi, DataPlaneNeeds...) == ""
	return pi
}

// What the suites' tests need of a run, declared with each test (plan.Catalog.Add): the plan
// leaves a test out, and the test skips with the reason, where a need is unmet.
var (
	NeedTwoClusters = plan.Need[PlanIn]{Skip: "needs two clusters: run with -clusters=2 or more",
		Met: func(in PlanIn) bool { return in.N >= 2 }}
	NeedTwoIstiods = plan.Need[PlanIn]{Skip: "the data plane needs istiod in the client's cluster and in another primary: run with -mesh.istiods=all",
		Met: func(in PlanIn) bool { return in.Istiods >= 2 }}
	NeedDataPlane = plan.Need[PlanIn]{Skip: "the provider runs no data plane (-istio.dataplane=none: istiod only)",
		Met: func(in PlanIn) bool { return in.PlanInput.DataPlane != report.DataPlaneNone }}
	// DataPlaneNeeds are what the probes' tests need.
	DataPlaneNeeds = []plan.Need[PlanIn]{NeedTwoClusters, NeedTwoIstiods, NeedDataPlane}
)

// Joins is the seconds a sequence of that many joins takes, one cluster after another: the k-th
// (k already joined) takes Join plus k times JoinGrowth.
func (pi PlanIn) Joins(joins int) float64 {
	j := float64(joins)
	return j*pi.Join + pi.JoinGrowth*j*(j-1)/2
}

// PlanOf returns the suites' setup steps and the items of catalog's tests for in under the flags o.
func PlanOf(o *expctx.Options, in env.PlanInput, catalog *plan.Catalog[PlanIn]) (steps, tests []plan.Item) {
	pi := PlanInOf(o, in)
	n := float64(pi.N)
	// Setup: PKI and remote secrets; pods once their nodes have podCIDRs (the API servers and
	// controller-managers set the pace); istiods start together, each listing its own cluster.
	// Four clusters get their pods at a time; the clusters already running slow them down.
	podRate := 280 / (1 + n/7)
	// A ztunnel holds one certificate per identity on its node: at most a service's pods, spread
	// round-robin over the nodes, or every service on every node.
	// 180 certificates over 3 small clusters took 0.2 s here (istiod about 1 ms of CPU each).
	certs := float64(min(in.Scale.Pods, in.Scale.Services*in.Scale.Nodes))
	const certRate = 300.0
	steps = plan.Scale([]plan.Item{
		{Name: "mesh", Expected: S(0.5 + 0.15*n), Detail: fmt.Sprintf("CA and remote secrets for %d clusters", pi.N)},
		{Name: "workloads", Expected: S(5 + pi.Pods*n/podRate), Detail: fmt.Sprintf("%d pods in each of %d clusters at ~%.0f pods/s", in.Scale.Pods, pi.N, podRate)},
		istiodStep(o, in, pi),
		{Name: "certificates", Expected: S(1 + certs*float64(in.Istiods)/certRate), Detail: fmt.Sprintf("about %.0f certificates in each of %d clusters at ~%.0f/s", certs, in.Istiods, certRate)},
	}, pi.k)
	// Real clusters stretch every item, a trimmed one too.
	return steps, plan.Scale(catalog.Items(pi), pi.k)
}

// istiodStep is the istiods, the east-west gateways with their Envoy clients (about 0.1 s for a
// 3-cluster run on the 2-core host) and, with -waypoints, a waypoint per scale namespace in every
// cluster (0.6 s for two per cluster at 3 clusters, 2026-12-07).
func istiodStep(o *expctx.Options, in env.PlanInput, pi PlanIn) plan.Item {
	n := float64(pi.N)
	expected := 2 + 0.2*float64(in.Istiods) + pi.Pods/1000 + 0.05*n
	detail := fmt.Sprintf("%d istiods and %d east-west gateways with their Envoy clients", in.Istiods, pi.N)
	if o.Waypoints {
		expected += 0.1 * n * float64(in.Scale.Namespaces)
		detail += fmt.Sprintf(", %d waypoints per cluster", in.Scale.Namespaces)
	}
	return plan.Item{Name: "istiod", Expected: S(expected), Detail: detail}
}
