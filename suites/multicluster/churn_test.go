package multicluster

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"istio.io/istio/pilot/pkg/features"

	"github.com/ambientmc/ambientmc/framework/churn"
	"github.com/ambientmc/ambientmc/framework/cluster"
	"github.com/ambientmc/ambientmc/framework/join"
	"github.com/ambientmc/ambientmc/framework/plan"
	"github.com/ambientmc/ambientmc/framework/report"
	"github.com/ambientmc/ambientmc/framework/xdswatch"
	"github.com/ambientmc/ambientmc/suites/multicluster/options"
	"github.com/ambientmc/ambientmc/topology"
)

// Every window of the sweep plus its drain and samples, after a fresh istiod and every join;
// trimmed to one rate in half as long windows when the plan does not fit.
var _ = planned.Add("TestChurn", nil, func(in options.PlanIn) plan.Item {
	c := &in.O.Churn
	fixed := in.Restart + 1 + float64(in.Remotes)*0.9 + 2 // fresh istiod, watcher, every join, the finding
	length := func(ch options.Churn) float64 {
		windows := ch.Windows(in.Remotes > 0)
		per := ch.Duration.Seconds() + 1.6
		if len(ch.Percents) > 0 {
			per = 0
			for _, p := range ch.Percents {
				per += p / 100 * in.Pods / ch.Rates[0]
			}
			per = per/float64(len(ch.Percents)) + 1.2
		}
		return fixed + float64(windows)*per
	}
	detail := func(ch options.Churn) string {
		return fmt.Sprintf("%d windows of %s (rates %s pods/s)", ch.Windows(in.Remotes > 0), ch.Duration, options.JoinFloats(ch.Rates))
	}
	it := plan.Item{Expected: options.S(length(*c)), Detail: detail(*c)}
	if len(c.Rates) > 1 || c.Duration > 5*time.Second {
		it.Trim = func() (plan.Item, string) {
			full := *c
			c.Rates, c.Duration = c.Rates[len(c.Rates)-1:], max(5*time.Second, c.Duration/2)
			return plan.Item{Name: "TestChurn", Expected: options.S(length(*c)), Detail: detail(*c)},
				fmt.Sprintf("TestChurn trimmed to fit -timeout: rates %s pods/s in %s windows instead of -churn.rates=%s -churn.duration=%s; raise -timeout for the full sweep (make e2e runs it)",
					options.JoinFloats(c.Rates), c.Duration, options.JoinFloats(full.Rates), full.Duration)
		}
	}
	return it
})

// TestChurn measures how fast endpoint changes reach a ztunnel-like client of the observed istiod
// and what the churn costs that istiod: with every cluster joined, pods change at each rate of
// -churn.rates in the observed cluster, in one remote cluster, then in all remote clusters at once
// (the rate shared among them, so the work is the same at any cluster count). It first checks what
// the client sees when remote endpoints turn unready (a finding).
func TestChurn(t *testing.T) {
	ctx := mc.begin(t)
	cf := mc.opts.Churn
	obs := mc.observed()
	remotes, coalesced := churnableRemotes(obs)
	for _, c := range coalesced {
		w := fmt.Sprintf("churn: %s stays out of the mesh during churn: it shares %s with another remote cluster, and istiod coalesces a remote network's endpoints into one capacity per service, which churn's per-cluster count cannot follow", c.Name, c.Network)
		mc.Logf("%s", w)
		mc.Report.Warnings = append(mc.Report.Warnings, w)
	}
	// istiod reads its debounce from the environment it inherits from this process; the pinned
	// features package parses it the same way.
	debounceAfter, debounceMax := features.DebounceAfter, features.DebounceMax
	limit := debounceMax + 5*time.Second

	members := []string{obs.Name}
	for _, c := range remotes {
		members = append(members, c.Name)
	}
	istiod, measured := istiodFor(t, ctx, members...)
	w := startWatcher(t, ctx, obs, istiod)
	waitHolds(t, ctx, w, members[1:]...)
	for i := 1; i < cf.Clients; i++ {
		// Extra clients only add istiod's push work; the first one is the one measured.
		startWatcher(t, ctx, obs, istiod)
	}
	mc.Logf("churn: %d ztunnel-like client(s) on istiod %s; debounce after %s, max %s; a change is lost after %s",
		cf.Clients, obs.Name, debounceAfter, debounceMax, limit)

	rep := &report.Churn{
		ObservedIstiod: obs.Name, MeasuredIstiod: measured, Clients: cf.Clients, LostAfterMs: ms(limit),
		Debounce: report.ChurnDebounce{AfterMs: ms(debounceAfter), MaxMs: ms(debounceMax)},
	}
	mc.Report.Churn = rep

	pods := map[string]*churn.Pods{}
	var err error
	pods[obs.Name], err = churn.NewPods(ctx, obs, mc.scale, nil, limit)
	require.NoError(t, err)
	var otherNetwork *cluster.Cluster // the finding is about split-horizon capacity
	for _, c := range remotes {
		// A cluster on the observed cluster's network shows its pods to the client as workloads of
		// their own, one on another network as split-horizon capacity: churn tracks what shows.
		var keys map[int]string
		if topology.RelationOf(obs.Cluster, c.Cluster) == topology.OtherNetwork {
			keys, err = churn.SplitHorizonKeys(w.Addresses(), c, mc.scale)
			require.NoError(t, err)
			if otherNetwork == nil {
				otherNetwork = c
			}
		}
		pods[c.Name], err = churn.NewPods(ctx, c, mc.scale, keys, limit)
		require.NoError(t, err)
	}
	// Registered after the watchers, so it runs before they close.
	t.Cleanup(func() {
		n, err := churn.RestorePods(ctx, w, slices.Collect(maps.Values(pods)), limit)
		require.NoError(t, err)
		mc.Logf("churn: %d replaced pods put back as they were", n)
	})

	if otherNetwork != nil {
		if mc.scale.Services < 2 {
			t.Logf("churn: remote readiness finding needs two services (one to fence with); skipped")
		} else {
			rep.Finding, err = churn.RemoteUnreadyFinding(ctx, w, obs.Name, otherNetwork, pods[otherNetwork.Name], mc.scale, limit)
			require.NoError(t, err)
			mc.Logf("churn: finding: %s", rep.Finding.Detail)
		}
	}

	for _, where := range cf.Cases {
		var targets []*churn.Pods
		var names []string
		switch where {
		case report.ChurnLocal:
			targets, names = []*churn.Pods{pods[obs.Name]}, []string{obs.Name}
		case report.ChurnOneRemote, report.ChurnAllRemote:
			if len(remotes) == 0 {
				if flagSet("churn.cases") {
					t.Errorf("churn case %s needs a remote cluster; -clusters=%d has none (drop it from -churn.cases)", where, len(mc.Clusters))
				} else {
					mc.Logf("churn: case %s left out: -clusters=%d has no remote cluster", where, len(mc.Clusters))
				}
				continue
			}
			for _, c := range remotes {
				targets, names = append(targets, pods[c.Name]), append(names, c.Name)
				if where == report.ChurnOneRemote {
					break
				}
			}
		}
		for _, mode := range cf.Modes {
			if mode == churn.Ready && where != report.ChurnLocal {
				continue // remote readiness is the finding above, not a latency
			}
			for _, rate := range cf.Rates {
				for _, pct := range percentsOrNone(cf.Percents) {
					name := fmt.Sprintf("where=%s/mode=%s/rate=%s", where, mode, strconv.FormatFloat(rate, 'f', -1, 64))
					if pct != nil {
						name += "/percent=" + strconv.FormatFloat(*pct, 'f', -1, 64)
					}
					t.Run(name, func(t *testing.T) {
						run := churnWindow(t, ctx, w, istiod, limit, churn.Spec{Where: where, Mode: mode, Rate: rate, Percent: pct, Clusters: names, Length: cf.Duration}, targets)
						rep.Runs = append(rep.Runs, run)
					})
				}
			}
		}
	}
	rep.Knee = churn.Knees(rep.Runs)
	for _, k := range rep.Knee {
		if k.RatePodsPerSecond != nil {
			mc.Logf("churn: knee %s %s at %.0f pods/s (p50 at the lowest rate %.0f pods/s: %.1f ms)", k.Where, k.Mode, *k.RatePodsPerSecond, k.BaseRate, k.BaseP50Ms)
		} else {
			mc.Logf("churn: no knee for %s %s within the sweep (p50 at %.0f pods/s: %.1f ms)", k.Where, k.Mode, k.BaseRate, k.BaseP50Ms)
		}
	}
}

// churnWindow measures one window and returns its report row; it fails the test when a change was
// lost.
func churnWindow(t *testing.T, ctx context.Context, w *xdswatch.Watcher, istiod join.Istiod, limit time.Duration, s churn.Spec, targets []*churn.Pods) report.ChurnRun {
	m, err := churn.MeasureWindow(ctx, w, istiod.Sampler(), limit, s, targets)
	require.NoError(t, err)
	mc.Logf("churn: %s", m)
	sum := m.Summary
	assert.True(t, m.Drained || sum.Unseen > 0, "drain ended with changes in flight but none unseen")
	assert.Zero(t, sum.Lost, "lost changes: %d late (over %s), %d never seen, %d keys in a wrong final state (first: %v)",
		sum.Late, limit, sum.Unseen, sum.Mismatched, m.FirstMismatches(5))
	assert.Positive(t, sum.Samples, "the window made no change")
	if s.Mode == churn.Ready {
		require.NoError(t, churn.RestoreReady(ctx, w, targets, limit), "pods Ready again at the watcher")
	}
	return m.Row
}

func percentsOrNone(ps []float64) []*float64 {
	if len(ps) == 0 {
		return []*float64{nil}
	}
	out := make([]*float64, len(ps))
	for i := range ps {
		out[i] = &ps[i]
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// churnableRemotes are the remote clusters churn can track: every one on the observed cluster's
// network (their pods show one by one) and, on another network, the first cluster of each; the
// rest of a shared remote network stay out of the mesh while churn runs (coalesced).
func churnableRemotes(obs *cluster.Cluster) (remotes, coalesced []*cluster.Cluster) {
	seen := map[string]bool{}
	for _, name := range everyCluster()[1:] {
		c := mc.Cluster(name)
		if topology.RelationOf(obs.Cluster, c.Cluster) == topology.OtherNetwork {
			if seen[c.Network] {
				coalesced = append(coalesced, c)
				continue
			}
			seen[c.Network] = true
		}
		remotes = append(remotes, c)
	}
	return remotes, coalesced
}

// flagSet says the command line set flag name (not its default).
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
