package options

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ambientmc/ambientmc/framework/env"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
)

// The suites' time plan: what each step and top-level test is expected to take, from its own
// parameters. The coefficients are per unit of work on the 2-core reference host with the local
// provider's emulated data plane; what they were calibrated on is in
// docs/suites.md#what-the-plan-is-calibrated-on. Real clusters' joins and installs take longer,
// and their figures are scaled by realClusterFactor.

// s is seconds as a Duration.
func s(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// realClusterFactor stretches the local provider's figures for real clusters (port-forwards,
// image pulls, real ztunnels).
const realClusterFactor = 3

// Plan returns the expected length of the suites' setup steps and of each top-level test.
func (o *Options) Plan(in env.PlanInput) (steps, tests []plan.Item) {
	n := len(in.Topology.Clusters)
	remotes := max(n-1, 0)
	pods := float64(in.Scale.Pods)
	k := 1.0
	if in.DataPlane != report.DataPlaneEmulated {
		k = realClusterFactor
	}
	scaled := func(items []plan.Item) []plan.Item {
		for i := range items {
			items[i].Expected = time.Duration(float64(items[i].Expected) * k)
		}
		return items
	}

	// Setup: PKI and remote secrets; pods once their nodes have podCIDRs (the API servers and
	// controller-managers set the pace); istiods start together, each listing its own cluster.
	// Four clusters get their pods at a time; the clusters already running slow them down.
	podRate := 280 / (1 + float64(n)/7)
	steps = scaled([]plan.Item{
		{Name: "mesh", Expected: s(0.5 + 0.15*float64(n)), Detail: fmt.Sprintf("CA and remote secrets for %d clusters", n)},
		{Name: "workloads", Expected: s(5 + pods*float64(n)/podRate), Detail: fmt.Sprintf("%d pods in each of %d clusters at ~%.0f pods/s", in.Scale.Pods, n, podRate)},
		{Name: "istiod", Expected: s(2 + 0.2*float64(in.Istiods) + pods/1000), Detail: fmt.Sprintf("%d istiods and %d east-west gateways", in.Istiods, n)},
	})

	// One join, small scale: convergence, the burst, the quiet steady window, three samples a
	// quarter second apart and a forced GC; istiod's own work grows with the pods a cluster brings.
	join := 1.6 + 2.0 + 0.7 + 0.2 + pods/4000*6
	if o.Join.Settle > 0 {
		join = 0.6 + o.Join.Settle.Seconds() + 0.7 + pods/4000*2
	}
	// A restart for a fresh istiod: it lists its own cluster again.
	restart := 3 + pods/1000
	dataPlane := 2.0 + 0.1*float64(n) // probes in every cluster, once; a fresh client per test
	dataPlaneRuns := in.Istiods >= 2
	probes := 0.0 // the join suite starts the data-plane probes where they run, for any test order
	if dataPlaneRuns {
		probes = dataPlane
	}
	tests = scaled([]plan.Item{
		{Name: "TestClusters", Expected: s(0.15 * float64(n)), Detail: fmt.Sprintf("%d clusters", n)},
		{Name: "TestClustersAreIndependent", Expected: s(0.005 * float64(n*n)), Detail: fmt.Sprintf("%d x %d reads", n, n)},
		{Name: "TestClustersRunControllers", Expected: s(7 + 0.25*float64(n)), Detail: fmt.Sprintf("EndpointSlices, a Deployment's pods, a namespace's deletion in %d clusters at once", n)},
		{Name: "TestControlPlaneJoin", Expected: s(float64(max(1, o.Join.Repeats))*(restart+6+float64(remotes)*join) + probes), Detail: joinDetail(o.Join.Repeats, remotes, join)},
		// Right after the join suite (go test's default order) it keeps that istiod, which has held
		// only the clusters it still holds; in another order it pays a restart and the joins too.
		{Name: "TestControlPlaneLeave", Expected: s(1 + float64(remotes)*(0.4+pods/4000*3)), Detail: fmt.Sprintf("%d leaves (after the join suite: its istiod, kept)", remotes)},
		{Name: "TestJoinFailurePaths", Expected: s(restart + 4), Detail: "at once: an unreachable remote (5s wait), a join timeout, a killed istiod"},
		o.checksItem(remotes, pods, dataPlane),
		o.churnItem(in, remotes, restart),
	})
	if dataPlaneRuns && n >= 2 {
		tests = append(tests, scaled([]plan.Item{
			o.latencyItem(dataPlane),
			{Name: "TestFailover", Expected: s(dataPlane + 2), Detail: "failover and failback at 100 requests/s"},
			{Name: "TestDataPlaneSecurity", Expected: s(1), Detail: "identities at every hop (on the probes the data-plane tests share)"},
		})...)
	}
	return steps, tests
}

// checksItem: the two heap checks together, as long as the longer (the memory check joins and
// leaves its clusters twice; the rotation check rotates 2n+1 times, reading the live heap after
// each), then the isolated rest at once, as long as the longest (four mid-sync deletions on fresh
// istiods, or the slowed sync), then the data-plane two (traffic through n rotations, then
// through an istiod restart).
func (o *Options) checksItem(remotes int, pods, dataPlane float64) plan.Item {
	c := o.Checks.Clusters
	if c == 0 || c > remotes {
		c = remotes
	}
	n := float64(o.Checks.Rotations)
	memory := 5 + float64(c)*(5.5+pods/250)
	rotation := 5 + pods/1000 + (2*n+1)*(5.8+pods/1000*4)
	midSync := 2 * (10 + pods/1000*21) // the slowed sync grows with the pods; the canaries wait out its rest
	truth := 18.9
	traffic := dataPlane + 2 + n*3.5
	restart := 6 + pods/1000*2
	return plan.Item{Name: "TestIstiodProperties", Expected: s(max(memory, rotation) + max(midSync, truth) + traffic + restart),
		Detail: fmt.Sprintf("at once: memory over %d remote clusters and 2 x %d rotations; then at once: 4 mid-sync deletions, a rejoin, an outage, a slowed sync; then traffic through rotations and a restart", c, o.Checks.Rotations)}
}

// latencyItem: the rate search (2 s steps), four runs and two harness-floor runs.
func (o *Options) latencyItem(dataPlane float64) plan.Item {
	l := o.Latency
	search := 0.0
	if l.QPS == 0 {
		search = 4 * 2.1 // typically four steps until one fails
	}
	one := func(d time.Duration) float64 { return d.Seconds() + 0.2 } // fortio's warm-up and teardown
	return plan.Item{Name: "TestLatency", Expected: s(dataPlane + search + 4*one(l.Duration) + 2*one(l.FloorDuration)),
		Detail: fmt.Sprintf("rate search, 4 runs of %s, 2 floor runs of %s", l.Duration, l.FloorDuration)}
}

// churnItem: every window of the sweep plus its drain and samples; trimmed to one rate in half
// as long windows when the plan does not fit.
func (o *Options) churnItem(in env.PlanInput, remotes int, restart float64) plan.Item {
	c := &o.Churn
	fixed := restart + 1 + float64(remotes)*0.9 + 2 // fresh istiod, watcher, every join, the finding
	length := func(ch Churn) float64 {
		windows := ch.windows(remotes > 0)
		per := ch.Duration.Seconds() + 1.6
		if len(ch.Percents) > 0 {
			per = 0
			for _, p := range ch.Percents {
				per += p / 100 * float64(in.Scale.Pods) / ch.Rates[0]
			}
			per = per/float64(len(ch.Percents)) + 1.2
		}
		return fixed + float64(windows)*per
	}
	detail := func(ch Churn) string {
		return fmt.Sprintf("%d windows of %s (rates %s pods/s)", ch.windows(remotes > 0), ch.Duration, joinFloats(ch.Rates))
	}
	it := plan.Item{Name: "TestChurn", Expected: s(length(*c)), Detail: detail(*c)}
	if len(c.Rates) > 1 || c.Duration > 5*time.Second {
		it.Trim = func() (plan.Item, string) {
			full := *c
			c.Rates, c.Duration = c.Rates[len(c.Rates)-1:], max(5*time.Second, c.Duration/2)
			return plan.Item{Name: "TestChurn", Expected: s(length(*c)), Detail: detail(*c)},
				fmt.Sprintf("TestChurn trimmed to fit -timeout: rates %s pods/s in %s windows instead of -churn.rates=%s -churn.duration=%s; raise -timeout for the full sweep (make e2e runs it)",
					joinFloats(c.Rates), c.Duration, joinFloats(full.Rates), full.Duration)
		}
	}
	return it
}

// windows counts the churn windows of the sweep.
func (c Churn) windows(remotes bool) int {
	w := 0
	for _, where := range c.Cases {
		if where != CaseLocal && !remotes {
			continue
		}
		for _, mode := range c.Modes {
			if mode == ModeReady && where != CaseLocal {
				continue
			}
			w += len(c.Rates) * max(len(c.Percents), 1)
		}
	}
	return w
}

func joinFloats(vs []float64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

func joinDetail(repeats, remotes int, join float64) string {
	d := fmt.Sprintf("baseline + %d joins x ~%.1fs", remotes, join)
	if repeats > 1 {
		d = fmt.Sprintf("%d sequences of %s, each on a fresh istiod", repeats, d)
	}
	return d
}
